"""The one way a file becomes a model: its text, then its data (JSON or YAML), then the pydantic model.

Each step that fails says so in one line naming the file (a `SweserveError`), never a traceback: the task
store, profiles, agent configs, predictions and results files all read through here.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any, Literal, TypeVar

import yaml
from pydantic import BaseModel, TypeAdapter, ValidationError

from sweserve.errors import SweserveError, describe_validation_error

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")
Format = Literal["JSON", "YAML"]


def read_text(path: Path, what: str = "file") -> str:
    """A file's UTF-8 text, or one line saying why it cannot be read (`what` names the file in it)."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SweserveError(f"{path}: missing {what}") from None
    except IsADirectoryError:
        raise SweserveError(f"{path}: is a folder, not a {what}") from None
    except UnicodeDecodeError:
        raise SweserveError(f"{path}: not UTF-8 text") from None
    except OSError as exc:
        raise SweserveError(f"{path}: {exc.strerror}") from None


FOUND_FILE_MAX_BYTES = 64 << 20  # a manifest, a trial's record or outcomes: far past any a run writes


def read_found_text(path: Path, limit: int = FOUND_FILE_MAX_BYTES) -> str:
    """The UTF-8 text of a file sweserve found (in a runs/ folder that came with a results file, not a name it was
    given): only a regular file of at most `limit` bytes, opened without waiting; OSError (or UnicodeDecodeError)
    else. Opened by name, a FIFO there waited forever for a writer and a huge sparse file was read whole: `report`
    hung or stalled (red team 23i, R23i-2, R23i-4)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > limit:
            kind = "a folder" if stat.S_ISDIR(st.st_mode) else "not a regular file" if not stat.S_ISREG(st.st_mode) \
                else f"over {limit} bytes"
            raise OSError(f"{path}: is {kind} (only a regular file of at most {limit} bytes is read)")
        data = fh.read(limit + 1)
    if len(data) > limit:  # grown since
        raise OSError(f"{path}: over {limit} bytes")
    return data.decode("utf-8")


RESULTS_FILE_MAX_BYTES = 1 << 30  # a results file: some hundred thousand records


def read_regular_text(path: Path, what: str = "file", limit: int = RESULTS_FILE_MAX_BYTES) -> str:
    """`read_text` of a file a user named, read as `read_found_text` reads: only a regular file of at most `limit`
    bytes, opened without waiting. A results file that was a FIFO (named, or globbed from a pack's folder) hung
    `report`, and `assess` with it (red team 23q, R23q-1)."""
    try:
        return read_found_text(path, limit)
    except FileNotFoundError:
        raise SweserveError(f"{path}: missing {what}") from None
    except UnicodeDecodeError:
        raise SweserveError(f"{path}: not UTF-8 text") from None
    except OSError as exc:
        raise SweserveError(f"{path}: {exc.strerror}" if exc.strerror else str(exc)) from None


def parse(source: str | Path, text: str, fmt: Format = "JSON") -> Any:
    """The data in a JSON or YAML text, or one line naming `source` and where the syntax breaks."""
    try:
        return json.loads(text) if fmt == "JSON" else yaml.safe_load(text)
    except json.JSONDecodeError as exc:
        raise SweserveError(f"{source}: not valid JSON: {exc.msg} at line {exc.lineno}") from None
    except yaml.YAMLError as exc:
        raise SweserveError(f"{source}: not valid YAML: {str(exc).splitlines()[0]}") from None


def read_data(path: Path, fmt: Format = "JSON", what: str = "file") -> Any:
    """A JSON or YAML file's data; text that is not UTF-8 is not valid JSON (or YAML) either."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise SweserveError(f"{path}: not valid {fmt}: not UTF-8") from None
    except OSError:
        text = read_text(path, what)  # the one line for a missing file, a folder, …
    return parse(path, text, fmt)


def validate(model: type[M], data: Any, source: str | Path) -> M:
    """`data` as the model, or one line naming `source` and the first field that is wrong."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise SweserveError(describe_validation_error(str(source), exc)) from None


def validate_as(adapter: TypeAdapter[T], data: Any, source: str | Path) -> T:
    """`validate` for a type that is not a model class (a discriminated union)."""
    try:
        return adapter.validate_python(data)
    except ValidationError as exc:
        raise SweserveError(describe_validation_error(str(source), exc)) from None


def load_model(path: Path, model: type[M], fmt: Format = "JSON", what: str = "file") -> M:
    """file → data → model, each failure one line."""
    return validate(model, read_data(path, fmt, what), path)


def write_atomic(path: Path, text: str, *, mode: int | None = None) -> Path:
    """The one way a record is written whole: to a temporary file beside it, then renamed over it, so a run killed
    mid-write leaves the old file or the new one, never half of one (a torn manifest read as none was rewritten
    with only a resume's selection: red team 15g's lead). `mode`: the file's permissions, set before it is seen."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8", errors="replace")
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path
