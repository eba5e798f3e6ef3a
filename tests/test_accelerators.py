"""Accelerator detection reads the whole failure message and knows the usual signs."""

from sweserve.evaluation.accelerators import accelerator_kind, accelerator_tests, sign_line
from sweserve.evaluation.grading import TestRun

JAX_TPU = """Traceback (most recent call last):
  File "python/sgl_jax/test/test_model_runner.py", line 40, in setUp
    self.mesh = create_device_mesh(ici_parallelism=[1, 4])
  File "python/sgl_jax/srt/utils/mesh_utils.py", line 12, in create_device_mesh
    assert devices[0].platform == device, f"device {device} is not consistent with JAX_PLATFORMS {plat}"
AssertionError: device tpu is not consistent with JAX_PLATFORMS cpu"""

LIBCUDA = """Traceback (most recent call last):
  File "test/srt/test_radix.py", line 3, in <module>
    from sgl_kernel import merge_state
  File "/opt/venv/lib/python3.10/site-packages/sgl_kernel/__init__.py", line 5, in <module>
    from sgl_kernel import common_ops
ImportError: libcuda.so.1: cannot open shared object file: No such file or directory"""

JAX_BACKENDS = ("RuntimeError: Unable to initialize backend 'cuda': FAILED_PRECONDITION: No visible GPU devices. "
                "(you may need to uninstall the failing plugin package, or set JAX_PLATFORMS=cpu to skip this backend.)")


def run(outcomes, skips=None, messages=None):
    return [TestRun(outcomes=outcomes, skips=skips or {}, messages=messages or {})]


def test_the_whole_message_is_read_and_a_tpu_assertion_is_a_tpu():
    found = accelerator_tests(run({"t": "failed"}, messages={"t": JAX_TPU}))
    assert found == {"t": "AssertionError: device tpu is not consistent with JAX_PLATFORMS cpu"}
    assert accelerator_kind(found) == "tpu"


def test_a_missing_libcuda_is_a_gpu():
    found = accelerator_tests(run({"t": "error"}, messages={"t": LIBCUDA}))
    assert accelerator_kind(found) == "gpu"
    assert sign_line(LIBCUDA)[0] == "gpu"


def test_usual_signs_and_no_false_alarm():
    assert sign_line(JAX_BACKENDS)[0] == "gpu"
    assert sign_line("AssertionError: Torch not compiled with CUDA enabled")[0] == "gpu"
    assert sign_line("RuntimeError: Found no NVIDIA driver on your system.")[0] == "gpu"
    assert sign_line("requires a TPU (Pallas kernel)")[0] == "tpu"
    assert sign_line("NotImplementedError: MLIR translation rule for primitive 'pallas_call' not found "
                     "for platform cpu")[0] == "tpu"
    assert sign_line("AssertionError: 1 != 2\n  File 'test_scheduler.py', line 3") is None
    found = accelerator_tests(run({"a": "passed", "b": "failed", "c": "skipped"},
                                  skips={"c": "slow test"}, messages={"a": LIBCUDA, "b": "KeyError: 'x'"}))
    assert found == {}  # a passing test is never counted, whatever it printed
    assert accelerator_kind({}) is None
