"""Keeping the step's batch size and lengths symbolic under ``torch.compile``.

``train.compile`` compiles the whole step once for every bucket shape (``dynamic=True``). A few
places in torch fix a symbolic dimension to the value of the first batch after all, and then
every new shape compiles the step again: minutes each on a CPU, about a minute each on an H100.
Each was found by compiling the step with the mel length marked dynamic
(``torch._dynamo.mark_dynamic`` raises and names the guard that specialised it), and each is
undone here, only where the running torch still has it. tests/train/test_compile.py compiles a
step of the model's own layers with inductor for two shapes and counts one graph.
"""
from __future__ import annotations

import torch


def keep_shapes_symbolic(device: torch.device) -> None:
    """Undo, once per process, what fixes a symbolic dimension of the step to the first batch's
    value:

    1. AOTAutograd hands the backward compiler the forward's saved activations with strides
       evaluated to the first batch's numbers (``evaluate_symexpr``), and the backward then
       guards every length to them. PyTorch fixed it upstream by keeping them symbolic
       (``deserialize_symexpr``, pytorch/pytorch#191885); the same replacement is installed here
       where the running release predates it.
    2. Inductor's lowering of a convolution's backward turns the gradient's strides into
       constants before it picks a kernel; for a 1-D convolution (the postnet, the reference
       encoder) it has no kernel of its own and calls ATen anyway, so that is done directly.
    3. On a CPU, oneDNN and NNPACK are chosen for a convolution by batch size (at least 16), a
       guard that splits the graph in two; the compiled step runs inside ``aten_convolutions``.
    4. Dynamo gives two dimensions that happen to be equal in the first batch one symbol ("duck
       sizing"): a mel length equal to the reference length, say. The next batch, where they
       differ, compiles again. Each dimension gets a symbol of its own.
    5. Inductor's C++ code (CPU only) sums a float reduction through an accumulation helper
       when it has more than 4096 elements, and guards the size to decide; with a symbolic size
       it now always uses the helper (the more precise of the two).
    """
    import torch._inductor.lowering as lowering
    import torch._inductor.output_code as output_code
    import torch.fx.experimental._config as shapes_config

    shapes_config.use_duck_shape = False

    if not getattr(output_code, "_myxtts_symbolic_strides", False) and \
            hasattr(output_code, "set_tracing_context_output_strides"):
        output_code.set_tracing_context_output_strides = _symbolic_output_strides
        output_code._myxtts_symbolic_strides = True
    conv_bwd = torch.ops.aten.convolution_backward.default
    lowered = lowering.lowerings.get(conv_bwd)
    if lowered is not None and not getattr(lowered, "_myxtts", False):
        from torch._inductor.kernel import conv

        def conv_backward(grad_out, x, weight, *args, **kw):
            if len(weight.get_size()) == 3:  # (out, in, kernel): a 1-D convolution
                return conv.aten_convolution_backward_fallback(grad_out, x, weight, *args, **kw)
            return lowered(grad_out, x, weight, *args, **kw)

        conv_backward._myxtts = True
        lowering.lowerings[conv_bwd] = conv_backward
    if device.type == "cpu":
        _sum_without_a_size_guard()


def aten_convolutions(fn):
    """``fn`` run with oneDNN and NNPACK off (ATen's own convolution), only while it runs: a
    compiled CPU step traced so has no guard on the batch size, and nothing else in the process
    (eager validation, generation) loses the faster kernels."""
    def run(*args, **kw):
        with torch.backends.mkldnn.flags(enabled=False), torch.backends.nnpack.flags(enabled=False):
            return fn(*args, **kw)
    return run


def _sum_without_a_size_guard() -> None:
    from torch._inductor.codegen import cpp
    from torch._inductor.utils import sympy_product

    decide = cpp.CppKernel.need_use_acc_helper
    if getattr(decide, "_myxtts", False):
        return

    def need_use_acc_helper(self, reduction_type, dtype, use_scalar):
        if reduction_type == "sum" and dtype == torch.float and self.call_ranges is not None:
            size = sympy_product(self.call_ranges[self.reduction_depth:])
            if getattr(size, "free_symbols", None):
                return True
        return decide(self, reduction_type, dtype, use_scalar)

    need_use_acc_helper._myxtts = True
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
