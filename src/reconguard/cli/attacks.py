"""`reconguard attack gradients`: attacks that need no recipe."""

from __future__ import annotations


from .common import claim_output, labelled_data, param_name, add_data_opts


def _cmd_gradient_matching(args, run) -> int:
    from ..attacks.gradients import GradientMatching, model_gradients
    from ..encoders import InstaHide
    from ..encoders.instahide import paper_c1
    from ..io import write_json_atomic
    from ..metrics import ssim
    from ..nn import mnist_cnn, seeded

    data = labelled_data(args.data, args.size, args.root)
    if not 0 <= args.index < len(data):
        from ..errors import ParameterError
        raise ParameterError(f"--index must be in [0, {len(data)}), got {args.index}.")
    out = claim_output(run, args.out or param_name(f"runs/attacks/gradient-matching-{data.name}-i{args.index}"
                                               f"-instahide{args.instahide_k}", args,
                                               ("steps", "distance", "unknown_label", "seed")) + ".json")
    with seeded(args.seed):
        model = mnist_cnn(data.shape, int(data.labels.max()) + 1)
    x, y = data.images[args.index:args.index + 1], data.labels[args.index:args.index + 1]
    target_x, target_y = x, y
    if args.instahide_k:
        enc = InstaHide(args.instahide_k, c1=paper_c1(args.instahide_k)).encrypt(data.images, data.labels)
        target_x, target_y = enc.images[args.index:args.index + 1], enc.labels[args.index:args.index + 1]
    grads = model_gradients(model, target_x, target_y)
    r = GradientMatching(model, steps=args.steps, distance=args.distance).run(
        grads, data.shape, label=None if args.unknown_label else target_y, num_classes=int(data.labels.max()) + 1)
    rec = r.reconstruction
    report = {"ssim_to_private": float(ssim(rec.clamp(0, 1), x)), "mse_to_target": float(((rec - target_x) ** 2).mean()),
              "target": "InstaHide encryption" if args.instahide_k else "private image", "gradient_distance": r.final_distance}
    write_json_atomic(out, report)
    print(f"gradient matching on a {report['target']}: SSIM to the private image {report['ssim_to_private']:.3f}, "
          f"MSE to the gradient's input {report['mse_to_target']:.3g}; JSON: {out}")
    return 0


def register(sub) -> None:
    atk = sub.add_parser("attack", help="attacks that need no recipe")
    asub = atk.add_subparsers(dest="attack_command", required=True)
    sp = asub.add_parser("gradients", help="gradient matching (DLG) on one image's gradient of a small CNN")
    add_data_opts(sp)
    sp.add_argument("--index", type=int, default=0)
    sp.add_argument("--instahide-k", type=int, default=0, help="> 0: the gradient is of an InstaHide encryption")
    sp.add_argument("--steps", type=int, default=30, help="L-BFGS outer steps")
    sp.add_argument("--distance", choices=["l2", "cosine"], default="l2")
    sp.add_argument("--unknown-label", action="store_true", help="learn the label too")
    sp.set_defaults(func=_cmd_gradient_matching)
