"""What runs inside a sandbox or an exported task's image, shipped as files: the isolated test runners
(`sweserve_boot`, `sweserve_unittest`, `sweserve_outcomes`), the privilege drop, the stream protocol, the exports'
root verifier (`sweserve_verify`), and the agent configs (`agents/*.yaml`).

Rule: every module here is standard library only and imports nothing from sweserve; they run under the image's own
Python. The host reads them as files (`importlib.resources.files("sweserve.harness")`), and imports only
`sweserve_protocol`, the stream schema it shares with the boxes. This folder sits at the repository root; `sweserve/harness` links
to it, and the wheel carries its files there.
"""
