#!/usr/bin/env python3
"""Pipeline-parallel specs (issue 6, docs/pipeline.md): an L-layer MLP, one layer per
stage, trained one SGD step on M microbatches, under the GPipe and 1F1B schedules, with
and without data parallelism, and seeded bugs.

    python3 scripts/gen_pipeline_specs.py verify-specs/pipeline

Reference: z_l = h_l W_l, h_{l+1} = gelu(z_l), y = z_{L-1}, loss = mse(y, t); the
backward pass written out; W_l' = W_l - lr dW_l.

Plan (mesh pp=L, optionally dp=2 x pp=L): stage l holds W_l. For each microbatch m
(rows m*b .. m*b+b-1 of the batch), stage l receives h_l from stage l-1 (stage 0
slices x), computes z_l and sends gelu(z_l) on; the last stage computes the
microbatch's loss and gradient (both scaled by 1/M: the batch mean is the mean of the
microbatch means) and the gradients flow back. Each stage accumulates its dW_l over the
microbatches and updates W_l. Each stage's ops are written in its schedule's order.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
import specgen  # noqa: E402

H, B_MB, LR = 4, 2, 0.1


def t(*s):
    return "tensor<" + "x".join(str(d) for d in s) + "xf32>" if s else "tensor<f32>"


def clip_lines(grads, total_from, role, stage_of=None, totals=None):
    """Global-norm clipping of `grads` (one H x H gradient each). Reference (stage_of
    None): the sum of squares over every gradient. Plan: stage l computes its clipped
    gradient from `totals[l]` (the all-reduced total, or its own sum for the bug)."""
    ra = ' {ref.role = "grad-norm"}' if role else ""
    L = []
    if stage_of is None:
        for g in grads:
            L += [f"%sq_{g[1:]} = ref.mul {g}, {g} : {t(H, H)}",
                  f"%ss_{g[1:]} = ref.reduce_sum %sq_{g[1:]} dims [0, 1]{ra} : {t(H, H)}"]
        acc = f"%ss_{grads[0][1:]}"
        for i, g in enumerate(grads[1:]):
            L.append(f"%total_{i} = ref.add {acc}, %ss_{g[1:]}{ra} : {t()}")
            acc = f"%total_{i}"
        totals = [acc] * len(grads)
    out = []
    for l, g in enumerate(grads):
        st = "" if stage_of is None else f" {{dist.stage = {stage_of[l]}}}"
        sfx = "" if stage_of is None else f"_{l}"
        if stage_of is None and l > 0:
            continue
        L += [f"%norm{sfx} = ref.sqrt {totals[l]}{ra if stage_of is None else st} : {t()}",
              f"%eps{sfx} = ref.constant 1.0e-6{st} : {t()}",
              f"%norm_eps{sfx} = ref.add %norm{sfx}, %eps{sfx}{st} : {t()}",
              f"%max_norm{sfx} = ref.constant 1.0{st} : {t()}",
              f"%ratio{sfx} = ref.div %max_norm{sfx}, %norm_eps{sfx}{st} : {t()}",
              f"%one{sfx} = ref.constant 1.0{st} : {t()}",
              f"%coef{sfx} = ref.minimum %one{sfx}, %ratio{sfx}{ra if stage_of is None else st} : {t()}"]
    for l, g in enumerate(grads):
        st = "" if stage_of is None else f" {{dist.stage = {stage_of[l]}}}"
        sfx = "" if stage_of is None else f"_{l}"
        L += [f"%coefb{l} = ref.broadcast %coef{sfx} dims []{st} : {t()} -> {t(H, H)}",
              f"%cdw{l} = ref.mul {g}, %coefb{l}{st} : {t(H, H)}"]
    return L


VOCAB = 6


def reference(L, M, dp, clip=None, tied=False):
    """tied: the input is token ids embedded with a table e, and the last layer's
    activation is projected back onto the vocabulary with the same table (an LM head
    tied to the embedding); its gradient is the sum of both uses'."""
    B = B_MB * M * dp
    V = VOCAB
    if tied:
        ins = [f'%ids: tensor<{B}xi64> {{ref.name = "ids", ref.bound = {V} : i64}}',
               f'%e: {t(V, H)} {{ref.name = "e"}}']
    else:
        ins = [f'%x: {t(B, H)} {{ref.name = "x"}}']
    ins += [f'%w{l}: {t(H, H)} {{ref.name = "w{l}"}}' for l in range(L)]
    ins += [f'%t: {t(B, V) if tied else t(B, H)} {{ref.name = "t"}}']
    outs = [f'{t()} {{ref.name = "loss"}}'] + [f'{t(H, H)} {{ref.name = "w{l}_next"}}' for l in range(L)]
    if tied:
        outs.append(f'{t(V, H)} {{ref.name = "e_next"}}')
    body = []
    if tied:
        body.append(f"%x = ref.embedding %e, %ids : {t(V, H)}, tensor<{B}xi64>")
    h = "%x"
    for l in range(L):
        body.append(f"%z{l} = ref.matmul {h}, %w{l} contract(1, 0) : {t(B, H)}, {t(H, H)}")
        if l < L - 1:
            body.append(f"%h{l + 1} = ref.gelu %z{l} : {t(B, H)}")
            h = f"%h{l + 1}"
    if tied:
        body += [f"%hl = ref.gelu %z{L - 1} : {t(B, H)}",
                 f"%logits = ref.matmul %hl, %e contract(1, 1) : {t(B, H)}, {t(V, H)}",
                 f"%loss = ref.mse_loss %logits, %t : {t(B, V)}",
                 f"%dlog = ref.mse_loss_grad %logits, %t : {t(B, V)}",
                 f"%de_head = ref.matmul %dlog, %hl contract(0, 0) : {t(B, V)}, {t(B, H)}",
                 f"%dhl = ref.matmul %dlog, %e contract(1, 0) : {t(B, V)}, {t(V, H)}",
                 f"%dz{L - 1} = ref.gelu_grad %z{L - 1}, %dhl : {t(B, H)}"]
    else:
        y = f"%z{L - 1}"
        body.append(f"%loss = ref.mse_loss {y}, %t : {t(B, H)}")
        body.append(f"%dz{L - 1} = ref.mse_loss_grad {y}, %t : {t(B, H)}")
    for l in reversed(range(L)):
        hl = "%x" if l == 0 else f"%h{l}"
        body.append(f"%dw{l} = ref.matmul {hl}, %dz{l} contract(0, 0) : {t(B, H)}, {t(B, H)}")
        if l > 0:
            body.append(f"%dh{l} = ref.matmul %dz{l}, %w{l} contract(1, 1) : {t(B, H)}, {t(H, H)}")
            body.append(f"%dz{l - 1} = ref.gelu_grad %z{l - 1}, %dh{l} : {t(B, H)}")
    if tied:
        body += [f"%dx = ref.matmul %dz0, %w0 contract(1, 1) : {t(B, H)}, {t(H, H)}",
                 f"%de_emb = ref.embedding_grad %dx, %ids : {t(B, H)}, tensor<{B}xi64> -> {t(V, H)}",
                 f"%de = ref.add %de_emb, %de_head : {t(V, H)}",
                 f"%en = ref.sgd_update %e, %de lr {LR} : {t(V, H)}"]
    grads = [f"%dw{l}" for l in range(L)]
    if clip:
        body += clip_lines(grads, "", role=True)
        grads = [f"%cdw{l}" for l in range(L)]
    for l in range(L):
        body.append(f"%w{l}n = ref.sgd_update %w{l}, {grads[l]} lr {LR} : {t(H, H)}")
    rets = ["%loss"] + [f"%w{l}n" for l in range(L)] + (["%en"] if tied else [])
    types = [t()] + [t(H, H)] * L + ([t(V, H)] if tied else [])
    return ("  func.func @reference(" + ",\n                       ".join(ins) + ")\n      -> (" +
            ",\n          ".join(outs) + ")\n      attributes {ref.reference} {\n" +
            "".join(f"    {b}\n" for b in body) +
            f"    return {', '.join(rets)}\n        : {', '.join(types)}\n  }}\n")


def schedule(kind, S, v, M, s):
    """Stage s's order of (event, chunk, microbatch), event "F" or "B": GPipe, 1F1B, or
    Megatron's interleaved 1F1B over v model chunks per stage."""
    if kind == "gpipe":
        return [("F", 0, m) for m in range(M)] + [("B", 0, m) for m in range(M)]
    if kind == "1f1b":
        warm = min(S - 1 - s, M)
        fwd = [("F", 0, m) for m in range(M)]
        bwd = [("B", 0, m) for m in range(M)]
    else:  # interleaved: virtual microbatch k -> (chunk, microbatch)
        total = M * v
        warm = min((S - s - 1) * 2 + (v - 1) * S, total)

        def at(k, forward):
            c = (k % (S * v)) // S
            return ("F" if forward else "B", c if forward else v - 1 - c, (k // (S * v)) * S + k % S)
        fwd = [at(k, True) for k in range(total)]
        bwd = [at(k, False) for k in range(total)]
    order = fwd[:warm]
    f, b = warm, 0
    while b < len(bwd):
        if f < len(fwd):
            order.append(fwd[f])
            f += 1
        order.append(bwd[b])
        b += 1
    return order


def steady_pairs(kind, S, v, M, s):
    """Where the steady state (one forward, one backward) of stage s's order begins and
    ends: events [first, last) pair up."""
    if kind == "gpipe":
        return 0, 0
    total = M * v
    warm = min(S - 1 - s, M) if kind == "1f1b" else min((S - s - 1) * 2 + (v - 1) * S, total)
    return warm, warm + 2 * (total - warm)


def plan(S, M, dp, kind, bug=None, clip=None, v=1, tied=False):
    """S stages, each with v model chunks (layer l on stage l % S). bug: wrong_stage,
    recv_swapped, drop_microbatch, double_microbatch, rescale_every_step,
    per_stage_norm."""
    L = S * v
    stage = [l % S for l in range(L)]
    Bl = B_MB * M  # rows per data rank
    mesh_axes = (["dp"] if dp > 1 else []) + ["pp"]
    mesh_shape = ([dp] if dp > 1 else []) + [S]
    rows = "dp" if dp > 1 else "_"
    V = VOCAB
    if tied:
        ins = [f'%ids: tensor<{Bl}xi64> {{dist.value = "ids", dist.layout = #dist.layout<[{rows}]>, dist.stage = 0}}',
               f'%e0: {t(V, H)} {{dist.value = "e", dist.layout = #dist.layout<[_, _]>, dist.stage = 0}}',
               f'%e1: {t(V, H)} {{dist.value = "e", dist.layout = #dist.layout<[_, _]>, dist.stage = {S - 1}}}']
    else:
        ins = [f'%x: {t(Bl, H)} {{dist.value = "x", dist.layout = #dist.layout<[{rows}, _]>, dist.stage = 0}}']
    ins += [f'%w{l}: {t(H, H)} {{dist.value = "w{l}", dist.layout = #dist.layout<[_, _]>, dist.stage = {stage[l]}}}'
            for l in range(L)]
    tw = V if tied else H
    ins += [f'%t: {t(Bl, tw)} {{dist.value = "t", dist.layout = #dist.layout<[{rows}, _]>, dist.stage = {stage[L - 1]}}}']
    outs = [f'{t()} {{dist.value = "loss", dist.layout = #dist.layout<[]>, dist.stage = {stage[L - 1]}}}']
    outs += [f'{t(H, H)} {{dist.value = "w{l}_next", dist.layout = #dist.layout<[_, _]>, dist.stage = {stage[l]}}}'
             for l in range(L)]
    if tied:
        outs += [f'{t(V, H)} {{dist.value = "e_next", dist.layout = #dist.layout<[_, _]>, dist.stage = {st}}}'
                 for st in (0, S - 1)]
    mb = t(B_MB, H)
    body, batches, finals = [], [0], {}

    def post(lines):
        """Messages posted together: one batch (batch_isend_irecv) when there are two or
        more, except those marked NOBATCH (posted one at a time)."""
        msgs = [x for x in lines if not x.startswith("//") and not x.endswith(" NOBATCH")]
        if len(msgs) > 1:
            batches[0] += 1
        out = []
        for x in lines:
            if x.endswith(" NOBATCH"):
                out.append(x[: -len(" NOBATCH")])
            elif x in msgs and len(msgs) > 1:
                head, ty = x.rsplit(" : ", 1)
                out.append(f"{head} {{batch = {batches[0]}}} : {ty}")
            else:
                out.append(x)
        return out

    for s in range(S):
        st = f"{{dist.stage = {s}}}"
        order = schedule(kind, S, v, M, s)
        body.append(f"// Stage {s}: " + " ".join(f"{e}{m}" + (f"c{c}" if v > 1 else "") for e, c, m in order))
        stage_start = len(body)
        # Each event's receives, computation and sends; the messages between two
        # computations are posted together (as Megatron's p2p calls batch them).
        events = []
        for e, c, m in order:
            l = c * S + s
            recvs, comp, sends = [], [], []
            if e == "F":
                if l == 0:
                    if tied and m == 0:
                        comp.append(f"%x = ref.embedding %e0, %ids {st} : {t(V, H)}, tensor<{Bl}xi64>")
                    comp.append(f"%h0_{m} = ref.slice %x offsets [{m * B_MB}, 0] sizes [{B_MB}, {H}] {st} : {t(Bl, H)}")
                elif bug == "recv_swapped" and l == 1 and m < 2:
                    if m == 0:
                        recvs.append("// BUG: receives microbatch 1's activation before microbatch 0's, one at a time.")
                        for src in (1, 0):
                            recvs.append(f'%h{l}_{src} = dist.recv from {stage[l - 1]} to {s} tag "act/l{l}/mb{src}" : {mb} NOBATCH')
                else:
                    recvs.append(f'%h{l}_{m} = dist.recv from {stage[l - 1]} to {s} tag "act/l{l}/mb{m}" : {mb}')
                comp.append(f"%z{l}_{m} = ref.matmul %h{l}_{m}, %w{l} contract(1, 0) {st} : {mb}, {t(H, H)}")
                if l < L - 1:
                    comp.append(f"%a{l}_{m} = ref.gelu %z{l}_{m} {st} : {mb}")
                    to = stage[l + 1]
                    if bug == "wrong_stage" and l == 0 and m == 1:
                        to = 2
                        sends.append("// BUG: microbatch 1's activation goes to stage 2, not 1.")
                    sends.append(f'dist.send %a{l}_{m} from {s} to {to} tag "act/l{l + 1}/mb{m}" : {mb}')
                elif tied:
                    comp += [f"%hl_{m} = ref.gelu %z{l}_{m} {st} : {mb}",
                             f"%lg_{m} = ref.matmul %hl_{m}, %e1 contract(1, 1) {st} : {mb}, {t(V, H)}",
                             f"%t_{m} = ref.slice %t offsets [{m * B_MB}, 0] sizes [{B_MB}, {V}] {st} : {t(Bl, V)}",
                             f"%loss_{m} = ref.mse_loss %lg_{m}, %t_{m} {st} : {t(B_MB, V)}",
                             f"%lossw_{m} = ref.scale %loss_{m} by {1.0 / M} {st} : {t()}"]
                else:
                    comp.append(f"%t_{m} = ref.slice %t offsets [{m * B_MB}, 0] sizes [{B_MB}, {H}] {st} : {t(Bl, H)}")
                    comp.append(f"%loss_{m} = ref.mse_loss %z{l}_{m}, %t_{m} {st} : {mb}")
                    comp.append(f"%lossw_{m} = ref.scale %loss_{m} by {1.0 / M} {st} : {t()}")
            else:
                if l == L - 1 and tied:
                    lv = t(B_MB, V)
                    comp += [f"%g_{m} = ref.mse_loss_grad %lg_{m}, %t_{m} {st} : {lv}",
                             f"%dl_{m} = ref.scale %g_{m} by {1.0 / M} {st} : {lv}",
                             f"%deh_{m} = ref.matmul %dl_{m}, %hl_{m} contract(0, 0) {st} : {lv}, {mb}",
                             f"%dhl_{m} = ref.matmul %dl_{m}, %e1 contract(1, 0) {st} : {lv}, {t(V, H)}",
                             f"%dz{l}_{m} = ref.gelu_grad %z{l}_{m}, %dhl_{m} {st} : {mb}"]
                elif l == L - 1:
                    comp.append(f"%g_{m} = ref.mse_loss_grad %z{l}_{m}, %t_{m} {st} : {mb}")
                    comp.append(f"%dz{l}_{m} = ref.scale %g_{m} by {1.0 / M} {st} : {mb}")
                else:
                    recvs.append(f'%dh{l + 1}_{m} = dist.recv from {stage[l + 1]} to {s} tag "grad/l{l + 1}/mb{m}" : {mb}')
                    comp.append(f"%dz{l}_{m} = ref.gelu_grad %z{l}_{m}, %dh{l + 1}_{m} {st} : {mb}")
                comp.append(f"%dw{l}_{m} = ref.matmul %h{l}_{m}, %dz{l}_{m} contract(0, 0) {st} : {mb}, {mb}")
                if l == 0 and tied:
                    comp.append(f"%dx_{m} = ref.matmul %dz0_{m}, %w0 contract(1, 1) {st} : {mb}, {t(H, H)}")
                if l > 0:
                    comp.append(f"%dh{l}_{m}_s = ref.matmul %dz{l}_{m}, %w{l} contract(1, 1) {st} : {mb}, {t(H, H)}")
                    sends.append(f'dist.send %dh{l}_{m}_s from {s} to {stage[l - 1]} tag "grad/l{l}/mb{m}" : {mb}')
            events.append((recvs, comp, sends))
        # Steps: a warm-up forward, a steady forward-and-backward pair, or a cool-down
        # backward; the messages between two steps are posted together.
        steps, i = [], 0
        first, last = steady_pairs(kind, S, v, M, s)
        while i < len(events):
            pair = first <= i and i + 1 < last
            steps.append(events[i:i + 2] if pair else events[i:i + 1])
            i += 2 if pair else 1
        comm = []
        for step in steps:
            for recvs, _, _ in step:
                comm += recvs
            body += post(comm)
            comm = []
            for _, comp, sends in step:
                body += comp
                comm += sends
        body += post(comm)
        if tied and s == 0:
            # The embedding's gradient: the microbatches' input gradients, in order.
            dx = f"%dx_0"
            if M > 1:
                dx = "%dxc"
                body.append(f"%dxc = ref.concat {', '.join(f'%dx_{m}' for m in range(M))} dim 0 {st} : "
                            f"{', '.join([mb] * M)}")
            body.append(f"%dee = ref.embedding_grad {dx}, %ids {st} : {t(Bl, H)}, tensor<{Bl}xi64> -> {t(V, H)}")
        if tied and s == S - 1:
            acc = "%deh_0"
            for m in range(1, M):
                body.append(f"%dehs_{m} = ref.add {acc}, %deh_{m} {st} : {t(V, H)}")
                acc = f"%dehs_{m}"
            body.append(f"%deh = ref.scale {acc} by 1.0 {st} : {t(V, H)}")
        # Accumulate each of the stage's layers' gradients (in microbatch order), then
        # update.
        for l in range(s, L, S):
            terms = [f"%dw{l}_{m}" for m in range(M)]
            if bug == "drop_microbatch" and l == 0:
                body.append("// BUG: microbatch 1's gradient is never added to the accumulator.")
                terms = [x for x in terms if not x.endswith("_1")]
            if bug == "double_microbatch" and l == 0:
                body.append("// BUG: microbatch 0's gradient is added twice.")
                terms = terms + [f"%dw{l}_0"]
            acc = terms[0]
            for i, x in enumerate(terms[1:]):
                body.append(f"%acc{l}_{i + 1} = ref.add {acc}, {x} {st} : {t(H, H)}")
                acc = f"%acc{l}_{i + 1}"
                if bug == "rescale_every_step" and l == 0:
                    if i == 0:
                        body.append("// BUG: the accumulator is rescaled after every microbatch.")
                    body.append(f"%accs{l}_{i + 1} = ref.scale {acc} by 0.5 {st} : {t(H, H)}")
                    acc = f"%accs{l}_{i + 1}"
            if dp > 1:
                body.append(f'%dw{l} = dist.all_reduce {acc} over ["dp"] "avg" {st} : {t(H, H)} -> {t(H, H)}')
                acc = f"%dw{l}"
            finals[l] = acc
            if not clip:
                body.append(f"%w{l}n = ref.sgd_update %w{l}, {acc} lr {LR} {st} : {t(H, H)}")
    finals = [finals[l] for l in range(L)]
    if tied:
        # The tied table's gradient: the embedding's (stage 0) plus the head's (last
        # stage), summed over the pipeline axis; every other stage contributes zero.
        body.append("// The tied table: both uses' gradients summed over the pipeline axis.")
        parts = []
        for st_i in range(S):
            sa = f"{{dist.stage = {st_i}}}"
            if st_i == 0:
                part = "%dee"
            elif st_i == S - 1:
                part = "%deh"
            else:
                part = f"%dez{st_i}"
                body.append(f"{part} = ref.constant 0.0 {sa} : {t(V, H)}")
            if dp > 1 and st_i in (0, S - 1):
                body.append(f'{part}_dp = dist.all_reduce {part} over ["dp"] "avg" {sa} : {t(V, H)} -> {t(V, H)}')
                part = f"{part}_dp"
            parts.append(part)
        body += [f"%de_sel = dist.stage_select {', '.join(parts)} : {', '.join([t(V, H)] * S)} -> {t(V, H)}",
                 f'%de = dist.all_reduce %de_sel over ["pp"] "sum" : {t(V, H)} -> {t(V, H)}',
                 f"%e0n = ref.sgd_update %e0, %de lr {LR} {{dist.stage = 0}} : {t(V, H)}",
                 f"%e1n = ref.sgd_update %e1, %de lr {LR} {{dist.stage = {S - 1}}} : {t(V, H)}"]
    if clip:
        # Clipping by the global norm: each stage's sum of squares, joined over the
        # pipeline axis, then every stage clips its gradients by the same coefficient.
        body.append("// Gradient clipping by the norm over every stage's parameters.")
        for l in range(L):
            st = f"{{dist.stage = {stage[l]}}}"
            body += [f"%sq{l} = ref.mul {finals[l]}, {finals[l]} {st} : {t(H, H)}",
                     f"%ss{l} = ref.reduce_sum %sq{l} dims [0, 1] {st} : {t(H, H)}"]
        per_stage = []
        for s in range(S):
            acc = f"%ss{s}"
            for l in range(s + S, L, S):
                body.append(f"%ssum{l} = ref.add {acc}, %ss{l} {{dist.stage = {s}}} : {t()}")
                acc = f"%ssum{l}"
            per_stage.append(acc)
        if bug == "per_stage_norm":
            body.append("// BUG: each stage clips by the norm of its own parameters' gradients.")
            totals = [per_stage[stage[l]] for l in range(L)]
        else:
            sel = ", ".join(per_stage)
            body += [f"%ss_stage = dist.stage_select {sel} : {', '.join([t()] * S)} -> {t()}",
                     f'%total = dist.all_reduce %ss_stage over ["pp"] "sum" : {t()} -> {t()}']
            totals = ["%total"] * L
        body += clip_lines(finals, None, role=False, stage_of=stage, totals=totals)
        for l in range(L):
            body.append(f"%w{l}n = ref.sgd_update %w{l}, %cdw{l} lr {LR} {{dist.stage = {stage[l]}}} : {t(H, H)}")
    loss = "%lossw_0"
    for m in range(1, M):
        body.append(f"%lsum_{m} = ref.add {loss}, %lossw_{m} {{dist.stage = {stage[L - 1]}}} : {t()}")
        loss = f"%lsum_{m}"
    if dp > 1:
        body.append(f'%loss = dist.all_reduce {loss} over ["dp"] "avg" {{dist.stage = {stage[L - 1]}}} : {t()} -> {t()}')
        loss = "%loss"
    rets = [loss] + [f"%w{l}n" for l in range(L)] + (["%e0n", "%e1n"] if tied else [])
    types = [t()] + [t(H, H)] * L + ([t(VOCAB, H)] * 2 if tied else [])
    mesh = (f'  dist.mesh @mesh axes = [{", ".join(chr(34) + a + chr(34) for a in mesh_axes)}] '
            f'shape = [{", ".join(str(s) for s in mesh_shape)}]\n\n')
    return mesh + ("  func.func @plan(" + ",\n                  ".join(ins) + ")\n      -> (" +
                   ",\n          ".join(outs) + ')\n      attributes {dist.mesh = @mesh, dist.pipeline = "pp"} {\n' +
                   "".join(f"    {b}\n" for b in body) +
                   f"    return {', '.join(rets)}\n        : {', '.join(types)}\n  }}\n")


def tied(bug=None):
    """A tied input embedding and LM head on 2 stages: stage 0 embeds the tokens and runs a
    layer, stage 1 projects onto the vocabulary with the same table; both hold the table
    and must update it with the sum of both uses' gradients."""
    T, V = 4, 6
    ty_e, ty_t, ty_l = t(V, H), t(T, H), t(T, V)
    ids = f"tensor<{T}xi64>"
    ref = f"""  func.func @reference(%ids: {ids} {{ref.name = "ids", ref.bound = {V} : i64}},
                       %e: {ty_e} {{ref.name = "e"}},
                       %w: {t(H, H)} {{ref.name = "w"}},
                       %tgt: {ty_l} {{ref.name = "tgt"}})
      -> ({t()} {{ref.name = "loss"}}, {ty_e} {{ref.name = "e_next"}}, {t(H, H)} {{ref.name = "w_next"}})
      attributes {{ref.reference}} {{
    %h0 = ref.embedding %e, %ids : {ty_e}, {ids}
    %z = ref.matmul %h0, %w contract(1, 0) : {ty_t}, {t(H, H)}
    %a = ref.gelu %z : {ty_t}
    %logits = ref.matmul %a, %e contract(1, 1) : {ty_t}, {ty_e}
    %loss = ref.mse_loss %logits, %tgt : {ty_l}
    %dl = ref.mse_loss_grad %logits, %tgt : {ty_l}
    %de_head = ref.matmul %dl, %a contract(0, 0) : {ty_l}, {ty_t}
    %da = ref.matmul %dl, %e contract(1, 0) : {ty_l}, {ty_e}
    %dz = ref.gelu_grad %z, %da : {ty_t}
    %dw = ref.matmul %h0, %dz contract(0, 0) : {ty_t}, {ty_t}
    %dh0 = ref.matmul %dz, %w contract(1, 1) : {ty_t}, {t(H, H)}
    %de_emb = ref.embedding_grad %dh0, %ids : {ty_t}, {ids} -> {ty_e}
    %de = ref.add %de_emb, %de_head : {ty_e}
    %e_next = ref.sgd_update %e, %de lr {LR} : {ty_e}
    %w_next = ref.sgd_update %w, %dw lr {LR} : {t(H, H)}
    return %loss, %e_next, %w_next : {t()}, {ty_e}, {t(H, H)}
  }}
"""
    rep = "#dist.layout<[_, _]>"
    if bug == "not_reduced":
        exchange = f"""    // BUG: each stage updates its copy of the table with its own use's gradient only.
    %e0n = ref.sgd_update %e0, %de_emb lr {LR} {{dist.stage = 0}} : {ty_e}
    %e1n = ref.sgd_update %e1, %de_head lr {LR} {{dist.stage = 1}} : {ty_e}"""
    else:
        exchange = f"""    // The tied table's gradient: both uses summed over the pipeline axis (Megatron's
    // embedding group), then each stage updates its copy.
    %de_sel = dist.stage_select %de_emb, %de_head : {ty_e}, {ty_e} -> {ty_e}
    %de = dist.all_reduce %de_sel over ["pp"] "sum" : {ty_e} -> {ty_e}
    %e0n = ref.sgd_update %e0, %de lr {LR} {{dist.stage = 0}} : {ty_e}
    %e1n = ref.sgd_update %e1, %de lr {LR} {{dist.stage = 1}} : {ty_e}"""
    plan = f"""  dist.mesh @mesh axes = ["pp"] shape = [2]

  func.func @plan(%ids: {ids} {{dist.value = "ids", dist.layout = #dist.layout<[_]>, dist.stage = 0}},
                  %e0: {ty_e} {{dist.value = "e", dist.layout = {rep}, dist.stage = 0}},
                  %e1: {ty_e} {{dist.value = "e", dist.layout = {rep}, dist.stage = 1}},
                  %w: {t(H, H)} {{dist.value = "w", dist.layout = {rep}, dist.stage = 0}},
                  %tgt: {ty_l} {{dist.value = "tgt", dist.layout = {rep}, dist.stage = 1}})
      -> ({t()} {{dist.value = "loss", dist.layout = #dist.layout<[]>, dist.stage = 1}},
          {ty_e} {{dist.value = "e_next", dist.layout = {rep}, dist.stage = 0}},
          {ty_e} {{dist.value = "e_next", dist.layout = {rep}, dist.stage = 1}},
          {t(H, H)} {{dist.value = "w_next", dist.layout = {rep}, dist.stage = 0}})
      attributes {{dist.mesh = @mesh, dist.pipeline = "pp"}} {{
    // Stage 0: embedding and the layer.
    %h0 = ref.embedding %e0, %ids {{dist.stage = 0}} : {ty_e}, {ids}
    %z = ref.matmul %h0, %w contract(1, 0) {{dist.stage = 0}} : {ty_t}, {t(H, H)}
    %a = ref.gelu %z {{dist.stage = 0}} : {ty_t}
    dist.send %a from 0 to 1 tag "act" : {ty_t}
    %da = dist.recv from 1 to 0 tag "grad" : {ty_t}
    %dz = ref.gelu_grad %z, %da {{dist.stage = 0}} : {ty_t}
    %dw = ref.matmul %h0, %dz contract(0, 0) {{dist.stage = 0}} : {ty_t}, {ty_t}
    %dh0 = ref.matmul %dz, %w contract(1, 1) {{dist.stage = 0}} : {ty_t}, {t(H, H)}
    %de_emb = ref.embedding_grad %dh0, %ids {{dist.stage = 0}} : {ty_t}, {ids} -> {ty_e}
    %wn = ref.sgd_update %w, %dw lr {LR} {{dist.stage = 0}} : {t(H, H)}
    // Stage 1: the LM head with the same table, and the loss.
    %a1 = dist.recv from 0 to 1 tag "act" : {ty_t}
    %logits = ref.matmul %a1, %e1 contract(1, 1) {{dist.stage = 1}} : {ty_t}, {ty_e}
    %loss = ref.mse_loss %logits, %tgt {{dist.stage = 1}} : {ty_l}
    %dl = ref.mse_loss_grad %logits, %tgt {{dist.stage = 1}} : {ty_l}
    %de_head = ref.matmul %dl, %a1 contract(0, 0) {{dist.stage = 1}} : {ty_l}, {ty_t}
    %da1 = ref.matmul %dl, %e1 contract(1, 0) {{dist.stage = 1}} : {ty_l}, {ty_e}
    dist.send %da1 from 1 to 0 tag "grad" : {ty_t}
{exchange}
    return %loss, %e0n, %e1n, %wn : {t()}, {ty_e}, {ty_e}, {t(H, H)}
  }}
"""
    return ref + "\n" + plan


def spec(comment, expect, S, M, dp, kind, bug=None, clip=None, v=1, tied=False):
    return comment, expect, reference(S * v, M, dp, clip, tied) + "\n" + plan(S, M, dp, kind, bug, clip, v, tied)


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--one":
        # One spec of any size, for benchmarks:
        #   gen_pipeline_specs.py --one OUT.mlir STAGES MICROBATCHES DP SCHEDULE [CHUNKS]
        out, S, M, dp, kind = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
        v = int(sys.argv[7]) if len(sys.argv) > 7 else 1
        comment, expect, body = spec(f"{kind} on dp={dp} x pp={S}, {v} chunk(s) per stage, {M} microbatches.",
                                     {"verdict": "verified"}, S, M, dp, kind, v=v)
        specgen.write(os.path.dirname(out) or ".", "gen_pipeline_specs.py", os.path.basename(out), comment,
                      expect, body)
        return
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "verify-specs", "pipeline")
    specgen.reset(out)
    ok = {"verdict": "verified"}

    def w(name, made):
        comment, expect, body = made
        specgen.write(out, "gen_pipeline_specs.py", name, comment, expect, body)
    w("gpipe_pp2_mb2.mlir", spec("GPipe on 2 stages, 2 microbatches: all forwards, then all backwards.",
                                 ok, 2, 2, 1, "gpipe"))
    w("1f1b_pp3_mb3.mlir", spec("1F1B on 3 stages, 3 microbatches: warm-up forwards, then one "
                                "forward and one backward alternately.", ok, 3, 3, 1, "1f1b"))
    w("1f1b_dp2_pp2_mb2.mlir", spec("1F1B on dp=2 x pp=2: each data rank pipelines its half of the "
                                    "batch; gradients and loss are averaged over dp.", ok, 2, 2, 2, "1f1b"))
    w("interleaved_pp2_v2_mb2.mlir",
      spec("Interleaved 1F1B (Megatron's virtual pipeline): 2 stages, 2 model chunks each (layers\n"
           "0 and 2 on stage 0, 1 and 3 on stage 1), 2 microbatches.", ok, 2, 2, 1, "interleaved", v=2))
    w("interleaved_dp2_pp2_v2_mb4_clip.mlir",
      spec("Interleaved 1F1B on dp=2 x pp=2 with 2 chunks per stage and 4 microbatches, clipping by\n"
           "the global norm over both stages' chunks.", ok, 2, 4, 2, "interleaved", clip=True, v=2))
    w("tied_embedding_pp2.mlir",
      ("Tied input embedding and LM head on the first and last of 2 stages: each holds the\n"
       "table, and both uses' gradients are all-reduced over the pipeline axis before the\n"
       "update, so the two copies stay equal.", ok, tied()))
    w("tied_embedding_pp2_not_reduced.mlir",
      ("BUG: the tied table's gradients are not exchanged between the first and last stage:\n"
       "each copy is updated with one use's gradient, and the copies drift apart.",
       {"verdict": "violated", "kind": "reduction", "at": "%e0n"}, tied("not_reduced")))
    for name, S, M, dp, kind, v in (("tied_gpipe_pp3_mb2", 3, 2, 1, "gpipe", 1),
                                    ("tied_1f1b_dp2_pp2_mb2", 2, 2, 2, "1f1b", 1),
                                    ("tied_interleaved_pp2_v2_mb2", 2, 2, 1, "interleaved", 2)):
        w(name + ".mlir",
          spec(f"{kind} on dp={dp} x pp={S} with a tied input embedding (stage 0) and LM head\n"
               f"(stage {S - 1}): the table's gradient is the sum of both uses', all-reduced over the\n"
               "pipeline axis (the middle stages contribute zero).", ok, S, M, dp, kind, v=v, tied=True))
    w("1f1b_pp2_mb2_clip.mlir",
      spec("1F1B on 2 stages with gradient clipping by the global norm: each stage's sum of\n"
           "squares, joined with dist.stage_select and all-reduced over the pipeline axis.",
           ok, 2, 2, 1, "1f1b", clip=True))
    w("1f1b_pp2_mb2_clip_per_stage_norm.mlir",
      spec("BUG: each stage clips its gradients by the norm of its own parameters only.",
           {"verdict": "violated", "kind": "grad-norm", "at": "%norm_0"}, 2, 2, 1, "1f1b", "per_stage_norm", clip=True))
    w("gpipe_pp3_mb2_send_wrong_stage.mlir",
      spec("BUG: stage 0 sends microbatch 1's activation to stage 2 instead of stage 1.",
           {"verdict": "violated", "kind": "schedule", "at": "%h1_1"}, 3, 2, 1, "gpipe", "wrong_stage"))
    w("gpipe_pp2_mb2_recv_swapped.mlir",
      spec("BUG: stage 1 posts the recv of microbatch 1 before that of microbatch 0, while stage 0\n"
           "sends microbatch 0 first: with blocking sends and receives, both wait forever.",
           {"verdict": "violated", "kind": "schedule"}, 2, 2, 1, "gpipe", "recv_swapped"))
    w("1f1b_pp2_mb2_drop_microbatch.mlir",
      spec("BUG: stage 0 never adds microbatch 1's weight gradient to its accumulator.",
           {"verdict": "violated", "kind": "reduction", "at": "%w0n"}, 2, 2, 1, "1f1b", "drop_microbatch"))
    w("1f1b_pp2_mb2_double_microbatch.mlir",
      spec("BUG: stage 0 adds microbatch 0's weight gradient twice.",
           {"verdict": "violated", "kind": "reduction", "at": "%acc0_2"}, 2, 2, 1, "1f1b", "double_microbatch"))
    w("gpipe_pp2_mb3_rescale_every_step.mlir",
      spec("BUG: stage 0 halves its gradient accumulator after every microbatch instead of\n"
           "leaving the scaling to the loss.",
           {"verdict": "violated", "kind": "reduction", "at": "%acc0_2"}, 2, 3, 1, "gpipe", "rescale_every_step"))


if __name__ == "__main__":
    main()
