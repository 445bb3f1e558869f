"""`-t mugraph`: write the module back as a Mirage saved-muGraph JSON file.

    mirage-opt lora.json -t mugraph                 # era-C JSON (current Mirage schema)
    mirage-opt lora.json -t 'mugraph{era=A}'        # the benchmark files' schema

See `mirage_xdsl.frontends.mugraph.export_mugraph` for the format (fresh guids from
10000000 / 20000000, smem_offset 0, dims padded to 4 entries).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import IO, ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.utils.target import Target

from mirage_xdsl.frontends.mugraph_export import export_mugraph


@dataclass(frozen=True)
class MugraphTarget(Target):
    """Serialize every `func.func` kernel graph of the module as one candidate of a muGraph file."""

    name: ClassVar[str] = "mugraph"

    era: str = "C"
    """Schema era of the written file: "C" (default, fp16 = 940), "B" or "A" (fp16 = 921)."""

    def emit(self, ctx: Context, module: ModuleOp, output: IO[str]) -> None:
        """Write `module` to `output` as saved-muGraph JSON of schema era `era`, then a newline.

        Raises:
            MugraphExportError: an op, type or structure without a muGraph equivalent (`export_mugraph`).
        """
        output.write(export_mugraph(module, era=self.era))
        output.write("\n")
