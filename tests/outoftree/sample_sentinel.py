"""Imported by nobody: a profile naming `tests.outoftree.sample_sentinel:Plugin` must not import it."""


class Plugin:
    name = "tests.outoftree.sample_sentinel:Plugin"

    def less(self, a: object, b: object) -> bool:
        return False
