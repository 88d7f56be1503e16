from os import PathLike
from typing import Any, Iterable, Literal, Optional, Union

__version__: str

Mode = Literal["letters", "cloze"]
Calibration = Literal["none", "content-free"]
ClozeScore = Literal["sum", "mean"]
Debias = Literal["none", "cyclic"]
Prompt = Literal["plain", "chat"]

class ReadoutError(Exception):
    code: str
    field: Optional[str]
    limit: Optional[int]
    def __init__(self, message: str, code: str, field: Optional[str] = ..., limit: Optional[int] = ...) -> None: ...

class State:
    id: Optional[str]
    def score(
        self,
        criteria: Iterable[dict[str, Any]],
        mode: Optional[Mode] = ...,
        calibration: Optional[Calibration] = ...,
        cloze_score: Optional[ClozeScore] = ...,
        debias: Optional[Debias] = ...,
    ) -> list[dict[str, Any]]: ...
    def dispose(self) -> None: ...
    def __enter__(self) -> "State": ...
    def __exit__(self, *exc: object) -> bool: ...

class Engine:
    def __init__(
        self,
        model: Union[str, "PathLike[str]"],
        runtime: Literal["ort", "own"] = ...,
        threads: Optional[int] = ...,
    ) -> None: ...
    def info(self) -> dict[str, Any]: ...
    def prefill(self, state: dict[str, Any], prompt: Optional[Prompt] = ..., mode: Optional[Mode] = ...) -> State: ...
    def score_many(
        self,
        states: Iterable[dict[str, Any]],
        mode: Optional[Mode] = ...,
        calibration: Optional[Calibration] = ...,
        cloze_score: Optional[ClozeScore] = ...,
        debias: Optional[Debias] = ...,
        prompt: Optional[Prompt] = ...,
    ) -> list[dict[str, Any]]: ...
    def live_states(self) -> int: ...

def report(rows: Iterable[dict[str, Any]]) -> dict[str, Any]: ...
