"""Keeping the step's batch size and lengths symbolic under ``torch.compile``, on any supported
torch release.

``train.compile`` compiles the whole step once for every bucket shape (``dynamic=True``). A few
places in torch fix a symbolic dimension to the value of the first batch after all, and then
every new shape compiles the step again: minutes each on a CPU, about a minute each on an H100.
Each was found by compiling the step with the mel length marked dynamic
(``torch._dynamo.mark_dynamic`` raises and names the guard that specialised it), and each is
undone here by a :class:`Hook`.

A hook touches private torch names, which a release may lack or rename. Each hook therefore
lists the names it needs and is installed only where every one of them exists; where one is
missing, torch's own behaviour stays (what it costs is the hook's ``without``: at worst a shape
compiled again) and the run says so in one line (``keep_shapes_symbolic`` returns the lines).
No torch internal is touched anywhere else in the compile path without the same check.
tests/train/test_compile.py removes each name in turn and checks that a compiled step still
trains and matches eager.
"""
from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from typing import NamedTuple

import torch


class Hook(NamedTuple):
    # Private torch names, "module:attribute.attribute", the one a release is likeliest to lack
    # first (the tests remove it).
    needs: tuple[str, ...]
    install: Callable[[], None]
    without: str  # what a run on a release without one of ``needs`` gets instead
    cpu_only: bool = False


def lookup(name: str):
    """The object a "module:attr.attr" name stands for; AttributeError or ImportError if this
    torch has no such thing. (torch's config modules raise AttributeError for an unknown knob.)"""
    module, _, attrs = name.partition(":")
    obj = importlib.import_module(module)
    for attr in attrs.split(".") if attrs else ():
        obj = getattr(obj, attr)
    return obj


def missing(hook: Hook) -> str | None:
    """The first private name of ``hook`` this torch lacks; None when it has them all."""
    for name in hook.needs:
        try:
            lookup(name)
        except (AttributeError, ImportError):
            return name
    return None


_installed: set[int] = set()


def supported_torch() -> str | None:
    """The torch releases MyXTTS is installed for, each checked with these hooks
    (``pyproject.toml``'s requirement, e.g. "<2.15,>=2.11"); None when the package metadata
    cannot be read (a tree never installed)."""
    from importlib import metadata

    try:
        requires = metadata.requires("myxtts") or []
    except metadata.PackageNotFoundError:
        return None
    for req in requires:
        found = re.fullmatch(r"torch([<>=!~][^;]*)", req.split(";")[0].replace(" ", ""))
        if found:
            return found.group(1)
    return None


def torch_in_range(version: str, spec: str) -> bool:
    """Whether ``version`` (a torch.__version__ such as "2.11.0+cu130") meets ``spec``."""
    from packaging.specifiers import SpecifierSet
    from packaging.version import Version

    return Version(version) in SpecifierSet(spec)


def keep_shapes_symbolic(device: torch.device) -> list[str]:
    """Install, once per process, every hook of ``HOOKS`` this torch release allows (see each
    hook's function for what it undoes). → one line for each hook it does not allow, naming the
    missing name and what the run gets instead."""
    notes = []
    for i, hook in enumerate(HOOKS):
        if hook.cpu_only and device.type != "cpu":
            continue
        gone = missing(hook)
        if gone is not None:
            notes.append(f"torch {torch.__version__} has no {gone}: {hook.without}")
        elif i not in _installed:
            hook.install()
            _installed.add(i)
    return notes


# ----------------------------------------------------------------------------------- hooks

def _allow_many_shapes(n: int = 64) -> None:
    """A graph that specialised after all (a batch of one, a guard only a CPU kernel adds) is
    one more cache entry; the default limit (8) would fall back to eager. Newer releases renamed
    the knob."""
    import torch._dynamo.config as dcfg

    for knob in ("cache_size_limit", "recompile_limit", "accumulated_cache_size_limit"):
        if hasattr(dcfg, knob):
            limit = 4 * n if knob.startswith("accumulated") else n
            setattr(dcfg, knob, max(getattr(dcfg, knob), limit))


def _quiet_cudagraph_shapes() -> None:
    """CUDA graphs record one graph per shape; more than 8 shapes is expected, not a warning."""
    import torch._inductor.config as icfg

    icfg.triton.cudagraph_dynamic_shape_warn_limit = None


def _constant_floats() -> None:
    """The step's Python floats (module constants such as a -1e4 mask fill, loss weights) never
    change. Traced as symbols, which dynamic=True does by default, one of them could not be
    turned into a tensor and dynamo restarted its analysis: a second trace of the whole step, 20
    of the 29 s of a warm start on the CPU (tiny). A float that did change per step would show
    as a recompile, which the loop counts."""
    import torch._dynamo.config as dcfg

    dcfg.specialize_float = True


def _no_duck_sizing() -> None:
    """Dynamo gives two dimensions that happen to be equal in the first batch one symbol ("duck
    sizing"): a mel length equal to the reference length, say. The next batch, where they
    differ, compiles again. Each dimension gets a symbol of its own."""
    import torch.fx.experimental._config as shapes_config

    shapes_config.use_duck_shape = False


def _mix_order_reduction_without_size_guards() -> None:
    """Inductor's Triton code generation (GPUs only) fuses a LayerNorm's backward reductions
    over rows and over columns into one kernel only above a size, 5 Mi elements, and decides with
    ``evaluate_expr``, which guards the symbolic batch size and lengths to that side: buckets
    either side of it compiled the step three times for eight shapes on an H100 (2026-11-27,
    ``512*B*Tt < 5242880``). Non-strict mode skips the size checks, so the decision no longer
    depends on the shape. A CPU never reaches this code; the knob is set on every device, so
    that what runs on a CPU is what runs on a GPU."""
    import torch._inductor.config as icfg

    icfg.triton.mix_order_reduction_non_strict_mode = True


def _symbolic_saved_strides() -> None:
    """AOTAutograd hands the backward compiler the forward's saved activations with strides
    evaluated to the first batch's numbers (``evaluate_symexpr``), and the backward then guards
    every length to them. PyTorch fixed it upstream by keeping them symbolic
    (``deserialize_symexpr``, pytorch/pytorch#191885); the same replacement is installed here."""
    import torch._inductor.output_code as output_code

    output_code.set_tracing_context_output_strides = _symbolic_output_strides


def _aten_conv1d_backward() -> None:
    """Inductor's lowering of a convolution's backward turns the gradient's strides into
    constants before it picks a kernel; for a 1-D convolution (the postnet, the reference
    encoder) it has no kernel of its own and calls ATen anyway, so that is done directly."""
    import torch._inductor.lowering as lowering
    from torch._inductor.kernel import conv

    conv_bwd = torch.ops.aten.convolution_backward.default
    lowered = lowering.lowerings.get(conv_bwd)
    if lowered is None:  # no lowering: inductor already calls ATen for it
        return

    def conv_backward(grad_out, x, weight, *args, **kw):
        if len(weight.get_size()) == 3:  # (out, in, kernel): a 1-D convolution
            return conv.aten_convolution_backward_fallback(grad_out, x, weight, *args, **kw)
        return lowered(grad_out, x, weight, *args, **kw)

    lowering.lowerings[conv_bwd] = conv_backward


def _sum_without_a_size_guard() -> None:
    """Inductor's C++ code (CPU only) sums a float reduction through an accumulation helper
    when it has more than 4096 elements, and guards the size to decide; with a symbolic size it
    now always uses the helper (the more precise of the two)."""
    from torch._inductor.codegen import cpp
    from torch._inductor.utils import sympy_product

    decide = cpp.CppKernel.need_use_acc_helper

    def need_use_acc_helper(self, reduction_type, dtype, use_scalar):
        if reduction_type == "sum" and dtype == torch.float and self.call_ranges is not None:
            size = sympy_product(self.call_ranges[self.reduction_depth:])
            if getattr(size, "free_symbols", None):
                return True
        return decide(self, reduction_type, dtype, use_scalar)

    cpp.CppKernel.need_use_acc_helper = need_use_acc_helper


def _symbolic_output_strides(example_inputs, compiled_graph) -> None:
    # torch._inductor.utils.set_tracing_context_output_strides, with each stride kept as the
    # symbolic expression inductor computed (a constant where it is one).
    from torch._inductor.utils import shape_env_from_inputs

    context = torch._guards.TracingContext.try_get()
    if context is None or context.output_strides is None:
        return
    shape_env = shape_env_from_inputs(example_inputs)

    def expr(e):
        if shape_env is None:
            return int(e)
        try:
            return shape_env.deserialize_symexpr(e)
        except TypeError:  # a value that is itself symbolic (nested tensors): as torch does
            return shape_env.evaluate_symexpr(e)

    for exprs in compiled_graph.output_strides:
        context.output_strides.append(None if exprs is None else tuple(expr(e) for e in exprs))


ONE_MORE_COMPILE = "every bucket shape may compile the step again (minutes each on a CPU)"
HOOKS: tuple[Hook, ...] = (
    Hook(("torch._dynamo.config:specialize_float",), _constant_floats,
         "dynamo traces the step twice before compiling it (a slower first step, nothing else)"),
    Hook((), _allow_many_shapes, ""),  # each knob checked by name: renamed across releases
    Hook(("torch._inductor.config:triton.cudagraph_dynamic_shape_warn_limit",), _quiet_cudagraph_shapes,
         "torch may warn about recording a CUDA graph for each of many shapes"),
    Hook(("torch._inductor.config:triton.mix_order_reduction_non_strict_mode",),
         _mix_order_reduction_without_size_guards,
         "a LayerNorm backward's size decides a fusion on a GPU, and " + ONE_MORE_COMPILE),
    Hook(("torch.fx.experimental._config:use_duck_shape",), _no_duck_sizing,
         "two lengths equal in the first batch share a symbol, and " + ONE_MORE_COMPILE),
    Hook(("torch._inductor.output_code:set_tracing_context_output_strides",
          "torch._inductor.utils:shape_env_from_inputs",
          "torch._guards:TracingContext.try_get",
          "torch.fx.experimental.symbolic_shapes:ShapeEnv.deserialize_symexpr"),
         _symbolic_saved_strides, "torch's own strides for the backward; " + ONE_MORE_COMPILE),
    Hook(("torch._inductor.kernel.conv:aten_convolution_backward_fallback",
          "torch._inductor.lowering:lowerings"),
         _aten_conv1d_backward, "inductor's own lowering of a convolution's backward; " + ONE_MORE_COMPILE),
    Hook(("torch._inductor.codegen.cpp:CppKernel.need_use_acc_helper",
          "torch._inductor.utils:sympy_product"),
         _sum_without_a_size_guard, "inductor's own choice of float sum on a CPU; " + ONE_MORE_COMPILE,
         cpu_only=True),
)


def aten_convolutions(fn):
    """``fn`` run with oneDNN and NNPACK off (ATen's own convolution), only while it runs: on a
    CPU they are chosen for a convolution by batch size (at least 16), a guard that splits the
    graph in two. A compiled CPU step traced so has no guard on the batch size, and nothing else
    in the process (eager validation, generation) loses the faster kernels."""
    def run(*args, **kw):
        with torch.backends.mkldnn.flags(enabled=False), torch.backends.nnpack.flags(enabled=False):
            return fn(*args, **kw)
    return run
