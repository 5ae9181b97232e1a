"""The one base class for errors a user causes (bad names, sizes, files): the CLI prints them as
one line and exits with code 2."""


class RooflabError(Exception):
    """A problem with the input, stated in one line."""
