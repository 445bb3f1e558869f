"""The `Optimizer` transformations as xDSL module passes on every `contraction.contract`:

    contraction-split-dim{dim=3 outer=4 inner=16}
    contraction-fuse-dims{a=0 b=1}
    contraction-permute-dims{permutation=3,0,1,2}
    contraction-make-executable

split/fuse/permute keep an op's scheduled-ness (exec types present or not); make-executable
schedules it.  An optimizer `ValueError` fails the pass (`PassFailedException`, same text).
The passes are not in the global registry yet: `contraction_passes()` gives name -> factory
for whoever registers them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from mirage_xdsl.dialects.contraction.ops import ContractOp
from mirage_xdsl.passes.contraction.optimizer import Optimizer


def _transform_all(
    module: ModuleOp, pass_name: str, transform: Callable[[Optimizer], object], schedules: bool = False
) -> None:
    """Apply `transform` to the config of every contraction.contract.  The op keeps its exec
    types only if it had them, unless `schedules` (then it always gets them).

    A scheduled result is verified (rules 1-4) before it replaces the op, so a pass never
    leaves a scheduled op that its verifier would reject.

    Raises:
        PassFailedException: the optimizer or `verify` raised ValueError (message kept, op
            named); the op is then unchanged.
    """
    for op in [op for op in module.walk() if isinstance(op, ContractOp)]:
        scheduled = schedules or op.is_scheduled
        optimizer = Optimizer(op.config())
        try:
            transform(optimizer)
            if scheduled:
                optimizer.verify()
        except ValueError as err:
            raise PassFailedException(f"{pass_name}: {op.name}: {err}") from err
        op.set_config(optimizer.config, scheduled)


@dataclass(frozen=True)
class SplitDimPass(ModulePass):
    """Split dimension `dim` into `outer` x `inner` (`Optimizer.split_dim`).

    Raises:
        PassFailedException: see `_transform_all`.
    """

    name = "contraction-split-dim"
    dim: int = 0
    outer: int = 1
    inner: int = 1

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        """Split `dim` of every contraction.contract in `op` (see the class docstring).

        Raises:
            PassFailedException: see `_transform_all`.
        """
        _transform_all(op, self.name, lambda optimizer: optimizer.split_dim(self.dim, self.outer, self.inner))


@dataclass(frozen=True)
class FuseDimsPass(ModulePass):
    """Fuse dimensions `a` and `b` (`Optimizer.fuse_dims`).

    Raises:
        PassFailedException: see `_transform_all`.
    """

    name = "contraction-fuse-dims"
    a: int = 0
    b: int = 1

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        """Fuse dimensions `a` and `b` of every contraction.contract in `op`.

        Raises:
            PassFailedException: see `_transform_all`.
        """
        _transform_all(op, self.name, lambda optimizer: optimizer.fuse_dims(self.a, self.b))


@dataclass(frozen=True)
class PermuteDimsPass(ModulePass):
    """Permute the dimensions like torch.permute (`Optimizer.permute_dims`).

    Raises:
        PassFailedException: see `_transform_all`.
    """

    name = "contraction-permute-dims"
    permutation: tuple[int, ...] = ()

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        """Permute the dimensions of every contraction.contract in `op` by `permutation`.

        Raises:
            PassFailedException: see `_transform_all`.
        """
        _transform_all(op, self.name, lambda optimizer: optimizer.permute_dims(list(self.permutation)))


@dataclass(frozen=True)
class MakeExecutablePass(ModulePass):
    """Schedule every contraction for the H100 model (`Optimizer.make_executable`).

    Raises:
        PassFailedException: see `_transform_all`.
    """

    name = "contraction-make-executable"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        """Give every contraction.contract in `op` a verified H100 schedule (exec types).

        Raises:
            PassFailedException: see `_transform_all`.
        """
        _transform_all(op, self.name, lambda optimizer: optimizer.make_executable(), schedules=True)


def _factory(pass_class: type[ModulePass]) -> Callable[[], type[ModulePass]]:
    return lambda: pass_class


def contraction_passes() -> dict[str, Callable[[], type[ModulePass]]]:
    """Pass name -> zero-argument factory returning the pass class (xDSL's registry form).

    Raises:
        Nothing.
    """
    passes = (SplitDimPass, FuseDimsPass, PermuteDimsPass, MakeExecutablePass)
    return {p.name: _factory(p) for p in passes}
