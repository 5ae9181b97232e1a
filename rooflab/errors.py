"""The one base class for errors a user causes (bad names, sizes, files): the CLI prints them as
one line and exits with code 2."""


class RooflabError(Exception):
    """A problem with the input, stated in one line."""


def read_json(path: str, error: type[RooflabError] = RooflabError):
    """A JSON file's data, or ``error`` with one line that says why it could not be read."""
    import json

    try:
        with open(path) as f:
            return json.load(f)
    except OSError as e:
        raise error(f"cannot read {path}: {e.strerror or e}") from None
    except ValueError as e:
        raise error(f"{path} is not valid JSON: {e}") from None
