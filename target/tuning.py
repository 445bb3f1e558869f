"""The tuning point: the plan choices `mirage-transpile` leaves to its cost model by default and
a tuner may override, as one value.

    point = TuningPoint.parse("candidate=2, stages=3")   # text of mirage-transpile{tuning=...}
    point.spec()                                        # -> "candidate=2,stages=3"
    TuningPoint().spec()                                # -> "" (the default pipeline)

Each field is an option of the pass that makes the choice (kn-fuse, tb-plan-pipeline,
tb-decompose-accumulators, cute-late-finisher); `mirage-transpile{tuning="..."}` forwards them,
so a user sets the compiler's extent and target there and a tuned plan in one option.  The
tuner's search space (driver/tune/space.py) is a domain per field of this class.

Needs no xDSL (the GPU phase of mirage-bench reads tuning points without it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields, replace
from typing import Any

from mirage_xdsl.target.cost_model import LONE_BLOCK_MAX_STAGES


class TuningError(ValueError):
    """A tuning spec or option set that names no tuning point (unknown key, bad value)."""


_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


@dataclass(frozen=True, order=True)
class TuningPoint:
    """One choice per tunable plan decision; the defaults are the default pipeline's.

    Attributes:
        candidate: kn-fuse lowers each fused group with its plan of this cost rank (0 = the
            cheapest estimate; a rank past the last plan falls back inside kn-fuse).
        stages: tb-plan-pipeline's cp.async pipeline depth (0 = its own choice).
        always_split: kn-fuse also weighs split-K plans when an unsplit grid fills the SMs.
        grid_sum: kn-fuse also weighs split-K plans whose partials are summed in the kernel.
        reduce_partials: tb-decompose-accumulators reduces a split block's accumulator before
            its grid sum (a smaller partial).
        late_finisher: cute-late-finisher's `shift`, the loop iterations each split-K partner
            hands to its group's finisher (0 = equal splits, last block to arrive combines).
        lone_block_max_stages: ring depth of wide lone blocks, built by tb-plan-pipeline and
            counted by kn-fuse's estimates alike.
        online_softmax: kn-fuse turns a max over the loop axis read inside the loop into a
            running max with rescaled accumulators (one kernel).
        flash_attention: kn-fuse lowers an attention group to the sm_90a flash-attention kernel
            (`cute.hopper_attention`) or, over a few query rows per head, the split-key decode
            kernel (`cute.decode_attention`) where that is estimated faster than its best
            generated plan (sm_90 targets only); false keeps the generated attention kernels.
    """

    candidate: int = 0
    stages: int = 0
    always_split: bool = True
    grid_sum: bool = True
    reduce_partials: bool = True
    late_finisher: int = 1
    lone_block_max_stages: int = LONE_BLOCK_MAX_STAGES
    online_softmax: bool = False
    flash_attention: bool = True

    def options(self) -> dict[str, Any]:
        """Every field as a keyword (the pass options the point sets)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def spec(self) -> str:
        """The text form `parse` reads: the fields that differ from the default, `key=value`
        joined by commas ("" for the default point)."""
        default = TuningPoint()
        parts = []
        for f in fields(self):
            value = getattr(self, f.name)
            if value != getattr(default, f.name):
                parts.append(f"{f.name}={str(value).lower() if isinstance(value, bool) else value}")
        return ",".join(parts)

    @classmethod
    def parse(cls, text: str) -> TuningPoint:
        """The point of a spec `key=value[, key=value ...]` (keys with `_` or `-`, booleans
        true/false; missing keys keep the default; "" is the default point).

        Raises:
            TuningError: an item is not `key=value`, the key names no field, or the value
                is not an integer / boolean as the field needs.
        """
        values: dict[str, Any] = {}
        for item in (p for p in re.split(r"[,\s]+", text.strip()) if p):
            key, sep, raw = item.partition("=")
            if not sep or not raw:
                raise TuningError(f"tuning item '{item}': expected key=value, e.g. candidate=2")
            values[key.replace("-", "_")] = raw
        return cls.from_options({k: _convert(cls, k, v) for k, v in values.items()})

    @classmethod
    def from_options(cls, options: dict[str, Any]) -> TuningPoint:
        """The point of a dict of field values (missing keys: the defaults).

        Raises:
            TuningError: an unknown key, or a value of the wrong type (bool for a flag, int
                otherwise).
        """
        kinds = _field_kinds(cls)
        unknown = sorted(set(options) - set(kinds))
        if unknown:
            raise TuningError(f"unknown tuning option(s) {', '.join(unknown)}; known: {', '.join(kinds)}")
        for key, value in options.items():
            if type(value) is not kinds[key]:
                raise TuningError(f"tuning option {key}: expected {kinds[key].__name__}, got {value!r}")
        return replace(cls(), **options)


def _field_kinds(cls: type[TuningPoint]) -> dict[str, type]:
    return {f.name: bool if f.type in ("bool", bool) else int for f in fields(cls)}


def _convert(cls: type[TuningPoint], key: str, raw: str) -> Any:
    kind = _field_kinds(cls).get(key)
    if kind is None:
        return raw  # from_options names the unknown key with the known ones
    if kind is bool:
        if raw.lower() in _TRUE | _FALSE:
            return raw.lower() in _TRUE
        raise TuningError(f"tuning option {key}={raw}: expected true or false")
    try:
        return int(raw)
    except ValueError:
        raise TuningError(f"tuning option {key}={raw}: expected an integer") from None
