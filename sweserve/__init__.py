"""sweserve: a PR-level inference-engineering benchmark for SGLang, in the style of SWE-bench."""

__version__ = "0.1.0"
