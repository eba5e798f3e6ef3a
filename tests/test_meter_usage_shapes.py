"""The proxy's meter reads each provider's usage object as that provider means it (`usage_in`).

A gateway that speaks OpenAI's shape for an Anthropic model (LiteLLM) states `prompt_tokens` with the cached
prompt already in it, and Anthropic's `cache_read_input_tokens`/`cache_creation_input_tokens` beside it. The
meter summed every prompt field it knew, so it counted the cached prompt twice: the floor rose above an honest
record (mini-swe-agent records `prompt_tokens`), which was then disputed. Each provider's own counts are now
summed within its shape, and the shapes a usage states are read as views of one prompt: the largest wins."""
from __future__ import annotations

import pytest
from test_egress import load_addon

addon = load_addon()


@pytest.mark.parametrize("usage, expected", [
    # LiteLLM (OpenAI's shape) for a Claude model: prompt_tokens holds the 800 cached tokens already
    ({"prompt_tokens": 1000, "completion_tokens": 10, "total_tokens": 1010, "cache_read_input_tokens": 800,
      "cache_creation_input_tokens": 0, "prompt_tokens_details": {"cached_tokens": 800}}, (1000, 10)),
    ({"prompt_tokens": 1000, "completion_tokens": 10, "total_tokens": 1010, "cache_read_input_tokens": 0,
      "cache_creation_input_tokens": 900}, (1000, 10)),
    # Anthropic's own: input_tokens is only the part after the last cache breakpoint
    ({"input_tokens": 200, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 800, "output_tokens": 10},
     (1000, 10)),
    # OpenAI's Responses API: input_tokens holds the cached part (stated only in its details)
    ({"input_tokens": 1000, "input_tokens_details": {"cached_tokens": 800}, "output_tokens": 10,
      "total_tokens": 1010}, (1000, 10)),
    # OpenAI's Chat Completions
    ({"prompt_tokens": 1000, "completion_tokens": 10, "total_tokens": 1010}, (1000, 10)),
    # a gateway stating both names for one count
    ({"prompt_tokens": 1000, "input_tokens": 1000, "completion_tokens": 10, "output_tokens": 10}, (1000, 10)),
    # Gemini: tool-use prompt beside the prompt, thoughts beside the candidates
    ({"promptTokenCount": 900, "toolUsePromptTokenCount": 100, "candidatesTokenCount": 6,
      "thoughtsTokenCount": 4, "totalTokenCount": 1010}, (1000, 10)),
])
def test_each_providers_usage_is_read_once(usage, expected):
    assert addon.usage_in({"usage" if "promptTokenCount" not in usage else "usageMetadata": usage}) == expected


def test_a_total_above_the_parts_still_counts_the_rest():
    """What a stated total holds beyond the parts read is counted as completion (red team 18b, R18b-2)."""
    assert addon.usage_in({"usage": {"prompt_tokens": 1000, "completion_tokens": 10, "total_tokens": 1500}}) == (
        1000, 500)
