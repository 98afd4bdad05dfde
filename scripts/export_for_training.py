#!/usr/bin/python3
"""Export a torch.nn.Module for training with magpie (`magpie optimize --train`).

An ordinary ONNX export loses what PyTorch knew about training: which tensors are parameters.
magpie's rule for a model without that knowledge trains every float initializer, so a causal mask
or an attention scale the exporter wrote as a constant would get a gradient. This helper exports
the module as magpie needs it:

  - in training mode (BatchNormalization with batch statistics, Dropout kept), with the
    TorchScript exporter, no constant folding, and initializers deduplicated only when they are
    the same tensor (a tied weight), never because two hold equal values;
  - every weight as an initializer under its state_dict name (the exporter's own names for
    parameters), which this helper checks after the export;
  - the module's trainable parameters (named_parameters() with requires_grad) in the model's
    metadata_props under "magpie.trainable_parameters", one name per line. magpie then trains
    exactly those (DESIGN.md "Data inputs vs. parameters"), and the step `magpie emit --torch`
    writes binds them back by name (params_from_module).

As a module:

    from export_for_training import export_for_training
    export_for_training(model, (x,), "model.onnx", input_names=["x"], output_names=["y"])

From the command line, for a factory FILE.py:FUNC that returns (module, example_inputs):

    /usr/bin/python3 scripts/export_for_training.py my_models.py:make_gpt OUT.onnx
"""
import importlib.util
import inspect
import os
import sys

import onnx
import torch

TRAINABLE_KEY = "magpie.trainable_parameters"


def trainable_names(module):
    return [n for n, p in module.named_parameters() if p.requires_grad]


def export_for_training(module, example_inputs, path, input_names=None, output_names=None,
                        opset=14, dynamic_axes=None):
    """Exports module to path (see the module's docstring); returns the trainable names.
    Raises RuntimeError naming the parameters that are missing from the file's initializers
    (other than those the forward never reads, which are reported on stderr)."""
    if not isinstance(example_inputs, tuple):
        example_inputs = (example_inputs,)
    was_training = module.training
    module.train()
    # The trace runs the forward once and updates batch-norm running statistics: keep the
    # module's state as it was, so the file holds the weights the caller has.
    state = {k: v.detach().clone() for k, v in module.state_dict().items()}
    # PyTorch 2.9 and later export with torch.export (dynamo=True) by default, which renames and
    # pre-transposes weights and ignores TrainingMode: ask for the TorchScript exporter.
    extra = {}
    if "dynamo" in inspect.signature(torch.onnx.export).parameters:
        extra["dynamo"] = False
    try:
        torch.onnx.export(module, example_inputs, path, export_params=True,
                          do_constant_folding=False, opset_version=opset,
                          training=torch.onnx.TrainingMode.TRAINING,
                          input_names=input_names, output_names=output_names,
                          dynamic_axes=dynamic_axes, keep_initializers_as_inputs=False, **extra)
    finally:
        with torch.no_grad():
            for k, v in module.state_dict().items():
                v.copy_(state[k])
        module.train(was_training)
    m = onnx.load(path)
    inits = {i.name for i in m.graph.initializer}
    used = {x for n in m.graph.node for x in n.input}
    names = trainable_names(module)
    missing = [n for n in names if n not in inits]
    # a parameter the forward never reads has no initializer, and needs no gradient from magpie
    unread = _unread_parameters(module, example_inputs) if missing else set()
    unused = [n for n in missing if n in unread]
    wrong = [n for n in missing if n not in unused]
    if wrong:
        raise RuntimeError("export_for_training: parameters not exported under their state_dict "
                           "names: " + ", ".join(wrong) + f" (initializers: {sorted(inits)[:20]})")
    if unused:
        print("export_for_training: parameters the forward does not read (no gradient): "
              + ", ".join(unused), file=sys.stderr)
    listed = [n for n in names if n in inits and n in used]
    del m.metadata_props[:]
    entry = m.metadata_props.add()
    entry.key = TRAINABLE_KEY
    entry.value = "\n".join(listed)
    onnx.save(m, path)
    return listed


def _flatten(out):
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, dict):
        out = list(out.values())
    return [t for o in out for t in _flatten(o)]


def _unread_parameters(module, example_inputs):
    """The trainable parameters one forward and backward of a copy leaves without a gradient."""
    import copy
    m = copy.deepcopy(module).train()
    m.zero_grad(set_to_none=True)
    sum(o.float().sum() for o in _flatten(m(*example_inputs)) if o.is_floating_point()).backward()
    return {n for n, p in m.named_parameters() if p.requires_grad and p.grad is None}


def _load_factory(spec):
    path, func = spec.rsplit(":", 1)
    s = importlib.util.spec_from_file_location("factory_module", path)
    mod = importlib.util.module_from_spec(s)
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    s.loader.exec_module(mod)
    return getattr(mod, func)


def main(argv):
    if len(argv) != 3:
        print(__doc__)
        return 2
    module, inputs = _load_factory(argv[1])()
    names = export_for_training(module, inputs, argv[2])
    print(f"wrote {argv[2]}: {len(names)} trainable parameters listed under {TRAINABLE_KEY}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
