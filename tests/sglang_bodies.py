"""PR, issue and squash-commit texts shaped like SGLang's (its PR template, bug template, bots), written for the tests."""

FILLED_TEMPLATE = """\
<!-- Thank you for your contribution! Please follow these guidelines to make your PR easy to review. -->

## Motivation

<!-- Describe the purpose and goals of this pull request. Link the issue it fixes. -->

When mixed chunked prefill is on and a request is aborted while its prompt is still being prefilled,
the radix cache keeps a lock on the partial prefix. Those nodes can never be evicted, so under load
the server ends up reporting that the KV cache pool is full.

Fixes #8331

## Modifications

<!-- Detail the changes made in this pull request. -->

- Release the lock in `ScheduleBatch.filter_batch` when a chunked request is aborted.
- Call `dec_lock_ref` on the abort path of the scheduler.

## Accuracy Tests

<!-- If this pull request affects model outputs, provide accuracy test results. -->

gsm8k accuracy 0.912 -> 0.913

## Benchmarking and Profiling

<!-- If this pull request impacts inference speed, provide benchmarking and profiling results. -->

| batch | before | after |
|---|---|---|
| 32 | 1534 tok/s | 1540 tok/s |

## Checklist

- [x] Format your code according to the [Format code with pre-commit](https://docs.sglang.ai/).
- [x] Add unit tests according to the [Run and add unit tests](https://docs.sglang.ai/).
- [ ] Update documentation according to [Write documentations](https://docs.sglang.ai/).
- [ ] Provide accuracy and speed benchmark results according to [Test the accuracy](https://docs.sglang.ai/).

## Review Process

1. Ping merge oncalls to start the PR flow.
2. Get approvals from code owners.

<!-- This is an auto-generated comment: release notes by coderabbit.ai -->
## Summary by CodeRabbit

* **Bug Fixes**
  * Aborted chunked requests now release their cached prefixes via dec_lock_ref.
<!-- end of auto-generated comment: release notes by coderabbit.ai -->

### CI States

Latest run: pr-test ✅ (stage-b-test-small-1-gpu), pr-test-amd ⏳
"""

EMPTY_TEMPLATE = """\
<!-- Thank you for your contribution! Please follow these guidelines to make your PR easy to review. -->

## Motivation

<!-- Describe the purpose and goals of this pull request. -->

## Modifications

<!-- Detail the changes made in this pull request. -->

## Accuracy Tests

<!-- If this pull request affects model outputs, provide accuracy test results. -->

## Benchmarking and Profiling

<!-- If this pull request impacts inference speed, provide benchmarking and profiling results. -->

## Checklist

- [ ] Format your code according to the [Format code with pre-commit](https://docs.sglang.ai/).
- [ ] Add unit tests according to the [Run and add unit tests](https://docs.sglang.ai/).
"""

MOTIVATION_PART_OF = """\
## Motivation

The OpenAI-compatible `/v1/completions` endpoint ignores `stop_token_ids` when `stream=true`:
generation continues past the stop token and the final chunk reports `finish_reason: length`.
Non-streaming requests stop correctly.

Part of #13808

## Modifications

Pass `stop_token_ids` through `build_sampling_params` in the streaming branch.

## Speed Tests and Profiling

No measurable change.

## Summary of Changes

Hello @dev, I'm Gemini Code Assist! I'm currently reviewing this pull request and will post my feedback shortly.

### Highlights

* **Streaming stop tokens**: the streaming branch now forwards stop_token_ids.
"""

BUG_ISSUE = """\
### Checklist

- [x] 1. I have searched related issues but cannot get the expected help.
- [x] 2. The bug has not been fixed in the latest version.
- [ ] 3. Please note that if the bug-related issue you submitted lacks corresponding environment info, it will be closed.

### Describe the bug

With `--enable-mixed-chunk`, aborting requests whose prompts are still being prefilled leaks radix-cache
locks. After a few hundred aborted requests, every new request waits forever in the queue.

### Reproduction

<!-- The command you used, the model, and what you saw. -->

    python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B-Instruct --enable-mixed-chunk
    python abort_many.py --n 500

### Environment

Python: 3.12.3, CUDA 12.9, sglang 0.5.6
"""

TRACKING_ISSUE = "Tracking issue for OpenAI API compatibility gaps.\n\n- [ ] streaming stop tokens\n- [ ] logprobs\n"

SQUASH_SUBCOMMITS = """\
* Release radix lock on abort

* fix lint

* Update scheduler.py

Co-authored-by: gemini-code-assist[bot] <176961590+gemini-code-assist[bot]@users.noreply.github.com>

---------

Co-authored-by: Some One <one@example.com>
"""

# -- bodies shaped like sglang-jax / sglang-omni PRs that describe the fix under other headings (written for the tests)

SUMMARY_WHAT_BODY = """\
> [!NOTE]
> Draft for early interface review; rebased on main after #1490.

## Summary

With the overlap scheduler on, greedy outputs diverge from the overlap-off run once more than 64 requests
are in flight: the first decode tokens of a new request are sometimes taken from another request.
This PR replaces the fixed-size `FutureTokenRing` with a ring sized from `max_running_requests` and adds a
wraparound guard in `resolve_future_token_ids`.

## What

- Add `ring_capacity()` to `python/sgl_jax/srt/managers/utils.py`.
- Replace the modulo in `TpWorkerOverlap.resolve_future_token_ids` with the guarded index.
- `python/sgl_jax/srt/managers/tp_worker_overlap_thread.py`: size the ring from the server args.

### Key change

```python
self.future_token_ids_limit = max_running_requests * FUTURE_RING_FACTOR
```

The ring now holds self.future_token_ids_limit = max_running_requests * FUTURE_RING_FACTOR entries.

## Rationale

Outputs must not depend on how many requests run at once: a request's tokens must be its own whatever the
concurrency, as with `--disable-overlap-schedule`.

Full credit goes to him for finding the wraparound.

## Files

| file | change |
|---|---|
| managers/utils.py | new helper |
| managers/tp_worker_overlap_thread.py | ring sizing |

## Precision Test

![gsm8k](https://github.com/user-attachments/assets/0f1e2d3c)

gsm8k 200q: 0.955 at c4, 0.700 at c64 before; 0.955 at c64 after.

## Verification

| concurrency | before | after |
|---|---|---|
| 8 | 0.955 | 0.955 |
| 64 | 0.700 | 0.955 |

Try to resolve #670
"""

EMPTY_ISSUE_TITLE = "[Bug] overlap outputs differ"

RFC_ISSUE = """\
### Summary

Rename the Wan pipeline package so that every Wan version shares one module, and let the text encoder run
through the encoder pipeline. Requests for Wan 2.1 and Wan 2.2 must produce the same embeddings as before.

### Proposed structure changes

- `python/sgl_jax/srt/multimodal/models/wan/` — **new**: shared Wan modules
- `python/sgl_jax/srt/multimodal/models/wan2_1/` — **removed**
"""

PROCESS_ONLY_BODY = """\
## Motivation

Rebased on main. PTAL @reviewer.

## Modifications

- Move `models/wan2_1` to `models/wan`.
"""
