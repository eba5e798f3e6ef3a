"""A sixteenth red team's (16d) attacks on closed book's newest defences (commit 65ae802): allow-listed client
tools and pinned `models:` in `images/proxy/egress_addon.py`.

Each test asserts the defended behaviour: it FAILS while the attack wins. All run on the host against the addon
(the `run` helper of tests/test_attacks_redteam15f.py); the gateway behind the allowed plain-http origin is
emulated by how it reads what the proxy forwards.

- R16d-1 WIN: a model named in the path other than Gemini's. LiteLLM's proxy serves `/openai/deployments/{model}/
  chat/completions` and `/engines/{model}/chat/completions` and routes to the path's model over the body's
  (`self.data["model"] = ... or model  # for azure deployments or self.data.get("model")`, in
  litellm/proxy/common_request_processing.py). The addon's `path_model` reads only `/models/NAME:...`, so body
  `{"model": "default"}` posted to `/openai/deployments/gpt-4o-search-preview/chat/completions` passes and asks
  the search model. `test_a_model_named_in_an_azure_style_path_must_be_pinned`.
- R16d-2 WIN: the JSON the proxy read is forwarded under the client's own Content-Type. LiteLLM's
  `_read_request_body` parses any content type containing "form" with `request.form()`: a JSON body whose string
  holds `&model=gpt-4o-search-preview&input=...&` sent as `application/x-www-form-urlencoded` is, to the proxy, a
  request for `default`, and to LiteLLM a request for the search model (`/v1/responses` takes `input` as a
  string). `test_the_forwarded_body_is_labelled_as_the_json_the_proxy_read`.
- R16d-3 WIN: the provider fetches URLs the agent puts in message content: OpenAI chat `image_url.url`,
  Anthropic `source: {"type": "url"}` (images, PDFs), Responses `input_file.file_url`, Gemini
  `fileData.fileUri`, Mistral's `document_url`, SGLang's `/generate` `image_data` (fetched by the server with requests.get). A screenshot
  service URL of the upstream PR page (`https://image.thum.io/get/https://github.com/sgl-project/sglang/pull/N/
  files`) makes any vision model read the oracle diff for the agent: no tool, no other model, nothing stripped.
  `test_the_provider_is_not_asked_to_fetch_a_url`.
- R16d-4 WIN (honest agents break): `models_named` reads a `model` key at any depth outside `tools`, message
  history included. Claude Code's Task tool takes a `model` argument (`"haiku"`): after one such call every later
  request resends a `tool_use` block with `input: {"model": "haiku"}` and is refused, so the agent dies for
  the rest of the trial. The same for a Gemini `functionCall.args`, and a structured-output schema with a property
  named `model` (its value, a schema, is "named" by its JSON). `test_a_model_key_in_message_content_is_not_a_model`.
"""

from __future__ import annotations

import json
from urllib.parse import parse_qsl

import pytest
from test_attacks_redteam15f import run

PINNED = ["default"]


# --- R16d-1 --------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("path", ["/openai/deployments/gpt-4o-search-preview/chat/completions",
                                  "/openai/deployments/perplexity/sonar/chat/completions",  # {model:path}
                                  "/engines/gpt-4o-search-preview/chat/completions",
                                  "/engines/perplexity/sonar/completions"])
def test_a_model_named_in_an_azure_style_path_must_be_pinned(tmp_path, monkeypatch, path):
    body = {"model": "default", "messages": [{"role": "user", "content": "find sglang PR 1234's diff"}]}
    refused, _ = run(tmp_path, monkeypatch, body, path=path, models=PINNED)
    assert refused, f"{path}: LiteLLM routes to the path's deployment, not the body's pinned model"


@pytest.mark.parametrize("path", ["/openai/deployments/default/chat/completions", "/v1/chat/completions",
                                  "/engines/default/completions"])
def test_control_a_pinned_model_in_the_path_passes(tmp_path, monkeypatch, path):
    refused, _ = run(tmp_path, monkeypatch, {"model": "default", "messages": []}, path=path, models=PINNED)
    assert not refused


# --- R16d-2 --------------------------------------------------------------------------------------------------------

def litellm_reads(flow) -> dict:
    """What LiteLLM's `_read_request_body` makes of the forwarded request: a form if "form" is in its content
    type (Starlette's urlencoded parser: the last value of a repeated field), else JSON."""
    ctype = flow.request.headers.get("content-type", "")
    if "form" in ctype:
        return dict(parse_qsl(flow.request.content.decode(), keep_blank_values=True))
    return json.loads(flow.request.content)


@pytest.mark.parametrize("ctype", ["application/x-www-form-urlencoded", "application/x-www-form-urlencoded; charset=utf-8"])
def test_the_forwarded_body_is_labelled_as_the_json_the_proxy_read(tmp_path, monkeypatch, ctype):
    smuggled = "&model=gpt-4o-search-preview&input=What+did+sglang+PR+1234+change&"
    body = {"model": "default", "input": "hi", "z": smuggled}
    refused, flow = run(tmp_path, monkeypatch, body, path="/v1/responses", models=PINNED,
                        headers={"content-type": ctype})
    if not refused:
        seen = litellm_reads(flow)
        assert seen.get("model") in PINNED, f"the gateway reads model {seen.get('model')!r} from {ctype}"


def test_control_a_json_request_reads_the_same_to_the_gateway(tmp_path, monkeypatch):
    refused, flow = run(tmp_path, monkeypatch, {"model": "default", "input": "hi"}, path="/v1/responses",
                        models=PINNED)
    assert not refused and litellm_reads(flow)["model"] == "default"


# --- R16d-3 --------------------------------------------------------------------------------------------------------

SHOT = "https://image.thum.io/get/https://github.com/sgl-project/sglang/pull/1234/files"


@pytest.mark.parametrize("body,path", [
    ({"model": "default", "messages": [{"role": "user", "content": [
        {"type": "text", "text": "Transcribe the diff in this image."},
        {"type": "image_url", "image_url": {"url": SHOT}}]}]}, "/v1/chat/completions"),
    ({"model": "default", "max_tokens": 4096, "messages": [{"role": "user", "content": [
        {"type": "image", "source": {"type": "url", "url": SHOT}},
        {"type": "text", "text": "Transcribe the diff."}]}]}, "/v1/messages"),
    ({"model": "default", "max_tokens": 4096, "messages": [{"role": "user", "content": [
        {"type": "document", "source": {"type": "url",
                                        "url": "https://example.org/render-pdf?u=github.com/sgl-project/sglang/pull/1234"}},
        {"type": "text", "text": "Transcribe it."}]}]}, "/v1/messages"),
    ({"model": "default", "input": [{"role": "user", "content": [
        {"type": "input_image", "image_url": SHOT},
        {"type": "input_file", "file_url": "https://patch-diff.githubusercontent.com/raw/sgl-project/sglang/pull/1234.diff"},
        {"type": "input_text", "text": "Transcribe."}]}]}, "/v1/responses"),
    ({"contents": [{"role": "user", "parts": [
        {"fileData": {"mimeType": "text/plain",
                      "fileUri": "https://patch-diff.githubusercontent.com/raw/sgl-project/sglang/pull/1234.diff"}},
        {"text": "Repeat this file."}]}]}, "/v1beta/models/default:generateContent"),
    ({"text": "<image> Transcribe the diff.", "image_data": SHOT}, "/generate"),
    # a URL parser by the WHATWG standard (Node's) reads "https:host/path" as https://host/path
    ({"model": "default", "messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "https:image.thum.io/get/github.com/sgl-project/sglang/pull/1234"}}]}]}, "/v1/chat/completions"),
    # Mistral's chat fetches a document_url itself (OCR of a PDF)
    ({"model": "default", "messages": [{"role": "user", "content": [
        {"type": "document_url", "document_url": "https://example.org/pdf?u=github.com/sgl-project/sglang/pull/1234"}]}]},
     "/v1/chat/completions"),
], ids=["openai-image_url", "anthropic-image-url", "anthropic-document-url", "responses-file_url", "gemini-fileUri",
        "sglang-image_data", "scheme-without-slashes", "mistral-document_url"])
def test_the_provider_is_not_asked_to_fetch_a_url(tmp_path, monkeypatch, body, path):
    refused, flow = run(tmp_path, monkeypatch, body, path=path, models=PINNED)
    if not refused:
        sent = flow.request.content.decode()
        assert "github" not in sent, "the model provider fetches a URL for the closed-book agent"


def test_control_an_sglang_base64_image_passes(tmp_path, monkeypatch):
    body = {"text": "<image> describe", "image_data": ["iVBORw0KGgoAAAANSUhEUgAAAAEAAAAB+/8=", "data:image/png;base64,AA=="]}
    refused, _ = run(tmp_path, monkeypatch, body, path="/generate", models=PINNED)
    assert not refused


def test_control_an_inline_image_passes(tmp_path, monkeypatch):
    """What honest clients send (mini-swe-agent, Claude Code, Codex): images inline, as data: URLs or base64."""
    data = "data:image/png;base64,iVBORw0KGgo="
    body = {"model": "default", "messages": [{"role": "user", "content": [
        {"type": "text", "text": "see https://github.com/sgl-project/sglang in the log"},
        {"type": "image_url", "image_url": {"url": data}}]}]}
    refused, flow = run(tmp_path, monkeypatch, body, models=PINNED)
    assert not refused and data in flow.request.content.decode()


# --- R16d-4 --------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("body,path", [
    ({"model": "claude-sonnet-4-5", "max_tokens": 1024, "messages": [
        {"role": "user", "content": "Explore the scheduler."},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "Task", "input": {
            "description": "explore", "prompt": "Find where batches are formed", "subagent_type": "Explore",
            "model": "haiku"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "scheduler.py"}]}]},
     "/v1/messages"),
    ({"contents": [{"role": "model", "parts": [{"functionCall": {"name": "run_benchmark",
                                                                 "args": {"model": "meta-llama/Llama-3-8B"}}}]},
                   {"role": "user", "parts": [{"functionResponse": {"name": "run_benchmark",
                                                                    "response": {"ok": True}}}]}]},
     "/v1beta/models/claude-sonnet-4-5:generateContent"),
    ({"model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": "Summarise the config."}],
      "response_format": {"type": "json_schema", "json_schema": {"name": "cfg", "schema": {
          "type": "object", "properties": {"model": {"type": "string"}, "tp_size": {"type": "integer"}}}}}},
     "/v1/chat/completions"),
], ids=["claude-code-task-tool-history", "gemini-function-call-args", "structured-output-schema"])
def test_a_model_key_in_message_content_is_not_a_model(tmp_path, monkeypatch, body, path):
    refused, _ = run(tmp_path, monkeypatch, body, path=path, models=["claude-sonnet-4-5"])
    assert not refused, "an honest request (a tool argument or schema property named `model`) is refused"
