from os import PathLike
from typing import Any, Callable, Iterable, Literal, Optional, Union

from . import Calibration, ClozeScore, Debias, Mode, Prompt

_Path = Union[str, "PathLike[str]"]

BLOCK_BYTES: int

def plan(inputs: Union[_Path, Iterable[_Path]], block_bytes: int = ...) -> list[dict[str, Any]]: ...
def score(
    inputs: Union[_Path, Iterable[_Path]],
    output: _Path,
    model: _Path,
    *,
    runtime: Literal["auto", "ort", "own"] = ...,
    actors: Optional[int] = ...,
    cpus_per_actor: float = ...,
    block_bytes: int = ...,
    format: Literal["jsonl", "parquet"] = ...,
    progress: Optional[Callable[[dict[str, Any]], None]] = ...,
    mode: Optional[Mode] = ...,
    calibration: Optional[Calibration] = ...,
    cloze_score: Optional[ClozeScore] = ...,
    debias: Optional[Debias] = ...,
    prompt: Optional[Prompt] = ...,
) -> dict[str, Any]: ...
def read(output: _Path, complete: bool = ...) -> list[dict[str, Any]]: ...
def errors(output: _Path) -> list[dict[str, Any]]: ...
def evaluate(output: _Path) -> dict[str, Any]: ...
def manifest(output: _Path) -> list[dict[str, Any]]: ...
