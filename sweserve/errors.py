"""The one exception type the CLI turns into a one-line message and exit code 2."""


class SweserveError(Exception):
    """Bad input or an unmet precondition, told to the user in one line."""


def describe_validation_error(source: str, exc) -> str:
    """One line naming the file and the first offending field of a pydantic ValidationError."""
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err.get("loc", ())) or "<root>"
    more = len(exc.errors()) - 1
    tail = f" (and {more} more)" if more > 0 else ""
    return f"{source}: field '{loc}': {err.get('msg', 'invalid')}{tail}"
