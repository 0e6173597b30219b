import os
from typing import IO, Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Type, Union

from ._types import Global as Global
from ._types import GlobalRef as GlobalRef
from ._types import Record as Record
from ._types import RefusedError as RefusedError
from ._types import ScanResult as ScanResult
from ._types import Verdict as Verdict

__version__: str
BUILTIN_POLICIES: Tuple[str, ...]

_Buffer = Union[bytes, bytearray, memoryview]
_PolicyArg = Union[str, "Policy"]
_Limits = Mapping[str, Union[int, str]]
_Classes = Mapping[Union[str, Tuple[str, str]], Any]

class Policy:
    def __init__(self, name: str = ...) -> None: ...
    @staticmethod
    def from_toml(text_or_path: Union[str, os.PathLike]) -> "Policy": ...
    def allow(self, module: Any, name: Optional[str] = ..., constructor: str = ...,
              forms: Optional[Sequence[str]] = ...) -> "Policy": ...
    @property
    def name(self) -> str: ...
    @property
    def globals(self) -> List[Tuple[str, str, str]]: ...
    @property
    def limits(self) -> List[Tuple[str, int]]: ...

def loads(data: _Buffer, *, policy: _PolicyArg = ..., limits: Optional[_Limits] = ...,
          buffers: Optional[Iterable[_Buffer]] = ..., classes: Optional[_Classes] = ...,
          encoding: Optional[str] = ...) -> Any: ...
def loads_stream(data: _Buffer, *, policy: _PolicyArg = ..., limits: Optional[_Limits] = ...,
                 buffers: Optional[Iterable[_Buffer]] = ..., classes: Optional[_Classes] = ...,
                 encoding: Optional[str] = ...) -> List[Any]: ...
def load(file: IO[bytes], *, policy: _PolicyArg = ..., limits: Optional[_Limits] = ...,
         buffers: Optional[Iterable[_Buffer]] = ..., classes: Optional[_Classes] = ...,
         encoding: Optional[str] = ...) -> Any: ...
def check(data: _Buffer, *, policy: _PolicyArg = ..., limits: Optional[_Limits] = ...,
          buffers: Optional[Iterable[_Buffer]] = ..., encoding: Optional[str] = ...,
          stream: bool = ...) -> Verdict: ...
def scan(data: Union[_Buffer, str, os.PathLike], *, policy: _PolicyArg = ...,
         limits: Optional[_Limits] = ..., stream: bool = ...) -> ScanResult: ...
