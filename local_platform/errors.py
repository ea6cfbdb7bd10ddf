"""The one error type of the local platform: a broken setup, said in one line with its fix."""


class PlatformError(RuntimeError):
    """A setup problem a person can fix: the message names what is missing and how to fix it.

    The CLI prints it as a single line instead of a stack trace.
    """
