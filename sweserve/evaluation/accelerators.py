"""Which hidden tests skipped or failed for want of a GPU or TPU, told from their skip reasons and failure text.

The whole failure message is read, not its last line: a JAX assertion "device tpu is not consistent with
JAX_PLATFORMS cpu" or an ``ImportError: libcuda.so.1: cannot open shared object file`` sits anywhere in a
traceback. TPU signs are looked for before GPU ones, since a TPU message often names CUDA too (JAX lists
every backend it tried); the line carrying the sign is what gets recorded.
"""

from __future__ import annotations

import re

from sweserve.evaluation.grading import TestRun

# Signs of a TPU, then of a GPU; a word boundary is not enough for names glued to others (libcuda.so.1).
TPU_SIGNS = re.compile(
    r"\btpu\b|libtpu|\bpallas|\bmosaic|\bTPU_[A-Z_]+|device tpu|backend 'tpu'|platforms? .*\btpu\b",
    re.IGNORECASE)
GPU_SIGNS = re.compile(
    r"libcuda\.so|libcudart|libnvrtc|libcublas|libcudnn|libnccl|libnvidia|nvidia-smi|\bnvml\b|"
    r"\bcuda\w*|\bgpu\w*|\bnvidia\b|\brocm\b|\bhip(?:_|\s+error)|\bnccl\b|\bcudnn\b|\bcublas\b|\btriton\b|"
    r"no (?:nvidia )?driver|torch not compiled with cuda|sgl_kernel|flashinfer|CUDA_VISIBLE_DEVICES",
    re.IGNORECASE)
GENERIC_SIGNS = re.compile(r"\baccelerator\b", re.IGNORECASE)
# Compatibility: one pattern matching any sign.
ACCELERATOR = re.compile("|".join(f"(?:{p.pattern})" for p in (TPU_SIGNS, GPU_SIGNS, GENERIC_SIGNS)), re.IGNORECASE)

MAX_WHY = 200


def sign_line(text: str) -> tuple[str, str] | None:
    """(kind, the line that shows it) for the first TPU, else GPU, else generic sign anywhere in text."""
    for kind, pattern in (("tpu", TPU_SIGNS), ("gpu", GPU_SIGNS), ("accelerator", GENERIC_SIGNS)):
        for line in text.splitlines():
            if pattern.search(line):
                return kind, line.strip()[:MAX_WHY]
    return None


def accelerator_tests(runs: list[TestRun]) -> dict[str, str]:
    """Tests that skipped or failed for want of a GPU/TPU, with the line of the reason or error that says so."""
    found: dict[str, str] = {}
    for run in runs:
        for test_id, outcome in run.outcomes.items():
            if outcome == "passed":
                continue
            why = run.skips.get(test_id, "") if outcome == "skipped" else run.messages.get(test_id, "")
            if (hit := sign_line(why)):
                found[test_id] = hit[1]
    return found


def accelerator_kind(found: dict[str, str]) -> str | None:
    """'tpu' when any recorded line shows a TPU, else 'gpu'; None when nothing was found."""
    if not found:
        return None
    return "tpu" if any(TPU_SIGNS.search(w) for w in found.values()) else "gpu"
