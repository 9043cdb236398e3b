"""planproof's exceptions (raised by the extension module and the package alike)."""


class SpecError(Exception):
    """An input planproof could not use: a spec that does not parse or load, a model
    configuration the generator cannot read. Carries the same place as the CLI's error:
    `file`, 1-based `line` and `column` (0 where unknown; a JSON spec's errors name
    their JSON path in the message), and `diagnostics`, every error as the CLI prints
    them ("file:line:col: error: ...", one a line)."""

    def __init__(self, message: str, file: str = "", line: int = 0, column: int = 0,
                 diagnostics: str = ""):
        self.message = message
        self.file = file
        self.line = line
        self.column = column
        self.diagnostics = diagnostics
        super().__init__(self.location + ": " + message if self.location else message)

    @property
    def location(self) -> str:
        """ "file:line:col", or fewer parts where unknown."""
        s = self.file
        if self.line:
            s += f":{self.line}"
            if self.column:
                s += f":{self.column}"
        return s
