"""Figures as plain SVG text, so they read well where no code runs (GitHub, nbviewer).

Colours are Okabe–Ito: orange for the CPU, blue for the GPU, and every part is
also labelled in words.
"""

from __future__ import annotations

from html import escape

from .race import Race

CPU_COLOUR = "#E69F00"
GPU_COLOUR = "#0072B2"
INK = "#222222"


def two_processors_svg() -> str:
    """'Two processors, two memories, and a narrow link between them'."""

    def box(x, y, w, h, fill, title, sub, dark=False):
        colour = "#ffffff" if dark else INK
        return (
            f'<rect x="{x}" y="{y}" width="{w}" height="{h}" rx="8" fill="{fill}" '
            f'stroke="{INK}" stroke-width="1.5"/>'
            f'<text x="{x + w / 2}" y="{y + h / 2 - 4}" text-anchor="middle" '
            f'font-size="17" font-weight="bold" fill="{colour}">{title}</text>'
            f'<text x="{x + w / 2}" y="{y + h / 2 + 16}" text-anchor="middle" '
            f'font-size="13" fill="{colour}">{sub}</text>'
        )

    def fast(x, y1, y2):
        return (
            f'<line x1="{x}" y1="{y1}" x2="{x}" y2="{y2}" stroke="{INK}" stroke-width="10" '
            f'marker-start="url(#tip)" marker-end="url(#tip)"/>'
            f'<text x="{x + 12}" y="{(y1 + y2) / 2 + 4}" font-size="12" fill="{INK}">'
            f"fast</text>"
        )

    return (
        '<svg xmlns="http://www.w3.org/2000/svg" width="640" height="300" viewBox="0 0 640 300" '
        'role="img" aria-labelledby="twoproc-title twoproc-desc" '
        'font-family="Helvetica, Arial, sans-serif">'
        '<title id="twoproc-title">Two processors, two memories, and a narrow link between '
        "them</title>"
        '<desc id="twoproc-desc">On the left the CPU, a few strong cores, above main memory '
        "(RAM). On the right the GPU, thousands of simple cores, above GPU memory. Each "
        "processor has a wide, fast path to its own memory. The two memories are joined only "
        'by a narrow link, the PCIe bus, marked "copy: slow".</desc>'
        '<defs><marker id="tip" viewBox="0 0 10 10" refX="5" refY="5" markerWidth="3" '
        f'markerHeight="3" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" '
        f'fill="{INK}"/></marker></defs>'
        '<rect width="640" height="300" fill="#ffffff"/>'
        + box(20, 20, 220, 90, CPU_COLOUR, "CPU", "a few strong cores")
        + box(20, 190, 220, 90, "#fbe7bd", "main memory (RAM)", "")
        + box(400, 20, 220, 90, GPU_COLOUR, "GPU", "thousands of simple cores", dark=True)
        + box(400, 190, 220, 90, "#cfe3f1", "GPU memory", "")
        + fast(130, 118, 182)
        + fast(510, 118, 182)
        + f'<line x1="250" y1="235" x2="390" y2="235" stroke="{INK}" stroke-width="2.5" '
        'stroke-dasharray="6 4" marker-start="url(#tip)" marker-end="url(#tip)"/>'
        + f'<text x="320" y="222" text-anchor="middle" font-size="14" font-weight="bold" '
        f'fill="{INK}">copy: slow</text>'
        + f'<text x="320" y="256" text-anchor="middle" font-size="12" fill="{INK}">'
        "PCIe bus</text>"
        "</svg>"
    )


def race_chart_svg(race: Race, max_steps: int = 8) -> str:
    """Total time against steps for both lanes, with the crossover marked."""
    steps = list(range(1, max_steps + 1))
    cpu = [race.cpu_total(s) for s in steps]
    gpu = [race.gpu_total(s) for s in steps]
    top = max(cpu + gpu) * 1.1
    left, right, up, down = 60, 470, 20, 230

    def x(s):
        return left + (s - 1) / max(max_steps - 1, 1) * (right - left)

    def y(v):
        return down - v / top * (down - up)

    def polyline(values, colour, dash=""):
        points = " ".join(f"{x(s):.1f},{y(v):.1f}" for s, v in zip(steps, values))
        return (
            f'<polyline points="{points}" fill="none" stroke="{colour}" stroke-width="3" {dash}/>'
        )

    cross = race.crossover()
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="560" height="280" viewBox="0 0 560 280" '
        f'role="img" aria-label="{escape(_chart_summary(race, cross))}" '
        f'font-family="Helvetica, Arial, sans-serif" font-size="12">',
        '<rect width="560" height="280" fill="#ffffff"/>',
        f'<line x1="{left}" y1="{down}" x2="{right}" y2="{down}" stroke="{INK}"/>',
        f'<line x1="{left}" y1="{up}" x2="{left}" y2="{down}" stroke="{INK}"/>',
        f'<text x="{(left + right) / 2}" y="{down + 34}" text-anchor="middle">steps</text>',
        f'<text x="14" y="{(up + down) / 2}" text-anchor="middle" '
        f'transform="rotate(-90 14 {(up + down) / 2})">total {race.unit}</text>',
    ]
    parts += [
        f'<text x="{x(s):.1f}" y="{down + 16}" text-anchor="middle">{s}</text>' for s in steps
    ]
    parts += [
        f'<text x="{left - 6}" y="{y(v) + 4:.1f}" text-anchor="end">{v:g}</text>'
        for v in _ticks(top)
    ]
    if cross is not None and cross <= max_steps:
        parts.append(
            f'<line x1="{x(cross):.1f}" y1="{up}" x2="{x(cross):.1f}" y2="{down}" '
            f'stroke="{INK}" stroke-dasharray="3 3"/>'
            f'<text x="{x(cross) + 4:.1f}" y="{up + 12}">GPU wins from '
            f"{cross} step{'s' if cross > 1 else ''}</text>"
        )
    parts += [
        polyline(cpu, CPU_COLOUR),
        polyline(gpu, GPU_COLOUR, 'stroke-dasharray="8 4"'),
        f'<text x="{right + 8}" y="{y(cpu[-1]) + 4:.1f}" fill="{INK}" font-weight="bold">'
        f"CPU</text>",
        f'<text x="{right + 8}" y="{y(gpu[-1]) + 4:.1f}" fill="{INK}" font-weight="bold">'
        f"GPU</text>",
        "</svg>",
    ]
    return "".join(parts)


def race_table_html(race: Race, max_steps: int = 8) -> str:
    """A table of both totals and the winner for 1..max_steps, the crossover row marked."""
    cross = race.crossover()
    rows = []
    for steps, cpu, gpu, winner in race.table(range(1, max_steps + 1)):
        mark = " ← the GPU starts winning" if steps == cross else ""
        style = ' style="font-weight:bold"' if steps == cross else ""
        rows.append(
            f"<tr{style}><td>{steps}</td><td>{escape(race.format(cpu))}</td>"
            f"<td>{escape(race.format(gpu))}</td><td>{winner}{mark}</td></tr>"
        )
    return (
        '<table class="race-table"><thead><tr><th>steps</th><th>CPU total</th>'
        "<th>GPU total</th><th>winner</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>"
    )


def race_fallback_html(race: Race, max_steps: int = 8) -> str:
    """What a reader sees where the live race cannot run (GitHub, nbviewer): its rules,
    and its results folded away under "Answer", as the lesson's other answers are, so
    that the page does not answer the question the lesson asks first."""
    cross = race.crossover()
    where = (
        f"The GPU wins from {cross} steps on." if cross else "With these speeds the GPU never wins."
    )
    return (
        '<div class="race-fallback">'
        "<p><b>The race</b> plays in a running notebook (run this one, or open it in Colab or "
        f"Binder). {escape(race.note[:1].upper() + race.note[1:])}. "
        f"{escape(race.rule())}. Predict who finishes first at 1 step, and from how many "
        "steps the GPU comes first, before you open the answer.</p>"
        "<details><summary>Answer: the race as a table and a chart</summary>"
        f"<p>{where}</p>"
        + race_table_html(race, max_steps)
        + race_chart_svg(race, max_steps)
        + "</details></div>"
    )


def _chart_summary(race: Race, cross) -> str:
    where = f"the GPU wins from {cross} steps" if cross else "the GPU never wins"
    return f"Total {race.unit} against steps for the CPU and the GPU; {where}."


def _ticks(top: float) -> list[float]:
    raw = top / 4
    magnitude = 10 ** len(str(int(raw))) / 10 if raw >= 1 else 0.1
    step = max(round(raw / magnitude), 1) * magnitude
    return [round(i * step, 6) for i in range(int(top // step) + 1)]


# -- training ------------------------------------------------------------------------------
def loss_curve_svg(
    points: list[tuple[int, float]],
    last_step: int = 0,
    colour: str = CPU_COLOUR,
    device: str = "cpu",
    max_points: int = 300,
) -> str:
    """The loss as read, against the training step: ``points`` are (step, loss). At most
    ``max_points`` are drawn (evenly picked, the last always kept), so a curve read at
    every step stays light to redraw."""
    left, right, up, down = 56, 500, 16, 196
    width, height = 560, 240
    shown = _thin(points, max_points)
    steps_end = max([last_step, 1] + [s for s, _ in shown])
    top = max([v for _, v in shown] + [1e-9]) * 1.1

    def x(step):
        return left + step / steps_end * (right - left)

    def y(value):
        return down - value / top * (down - up)

    if shown:
        summary = (
            f"Loss against training step on {device}: {len(points)} reads, from "
            f"{shown[0][1]:.3f} at step {shown[0][0]:,} to {shown[-1][1]:.3f} at step "
            f"{shown[-1][0]:,}."
        )
    else:
        summary = f"Loss against training step on {device}: no read yet."
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(summary)}" '
        'font-family="Helvetica, Arial, sans-serif" font-size="12">',
        f'<rect width="{width}" height="{height}" fill="#ffffff"/>',
        f'<line x1="{left}" y1="{down}" x2="{right}" y2="{down}" stroke="{INK}"/>',
        f'<line x1="{left}" y1="{up}" x2="{left}" y2="{down}" stroke="{INK}"/>',
        f'<text x="{(left + right) / 2}" y="{down + 34}" text-anchor="middle">training step</text>',
        f'<text x="14" y="{(up + down) / 2}" text-anchor="middle" '
        f'transform="rotate(-90 14 {(up + down) / 2})">loss, as read</text>',
        f'<text x="{left}" y="{down + 16}" text-anchor="middle">0</text>',
        f'<text x="{right}" y="{down + 16}" text-anchor="middle">{steps_end:,}</text>',
        f'<text x="{left - 6}" y="{down + 4}" text-anchor="end">0</text>',
        f'<text x="{left - 6}" y="{up + 4}" text-anchor="end">{top:.2g}</text>',
    ]
    if len(shown) == 1:
        parts.append(
            f'<circle cx="{x(shown[0][0]):.1f}" cy="{y(shown[0][1]):.1f}" r="3" fill="{colour}"/>'
        )
    elif shown:
        line = " ".join(f"{x(s):.1f},{y(v):.1f}" for s, v in shown)
        parts.append(
            f'<polyline points="{line}" fill="none" stroke="{colour}" stroke-width="2.5"/>'
        )
    else:
        parts.append(
            f'<text x="{(left + right) / 2}" y="{(up + down) / 2}" '
            'text-anchor="middle" fill="#666666">no read of the loss yet</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def _thin(points: list, limit: int) -> list:
    if len(points) <= limit:
        return list(points)
    stride = len(points) / limit
    picked = [points[int(i * stride)] for i in range(limit - 1)]
    return picked + [points[-1]]


def training_fallback_html(parameters: int) -> str:
    """What a reader sees where the live training cannot run (GitHub, nbviewer): what the
    widget does and the question to predict, with what to look for folded away. It shows
    no measured figure: a saved notebook's speeds would be one machine's, not the reader's."""
    return (
        '<div class="training-fallback">'
        f"<p><b>Train a network, live.</b> In a running notebook (run this one, or open it in "
        f"Colab or Binder) a network of {parameters:,} parameters learns to tell three spirals "
        "apart, on the notebook's device. Controls: <i>Read the loss every N steps</i>, "
        "<i>Batch size</i>, <b>Train</b> and <b>Stop</b>. It draws the loss each time it reads "
        "it, and shows the steps and samples per second it measures.</p>"
        "<p>Predict before you train: on your device, how much slower is training when the "
        "loss is read at every step rather than every 100 steps?</p>"
        "<p>A second mode, <i>modelled GPU</i>, works out the same speeds for a GPU from "
        "made-up times, labelled as such: what a read would cost where there is no GPU to "
        "measure.</p>"
        "<details><summary>What to look for</summary>"
        "<p>Each read is <code>loss.item()</code>. On a GPU it makes the CPU wait for the GPU to "
        "finish every step queued so far, and the GPU then idles while the CPU queues the next "
        "step. How much that costs depends on how long the GPU's step takes next to the "
        "CPU's time to queue it: most when the two are close, little when either one is much "
        "the slower. On a CPU there is no queue, and a read costs little. A larger batch gives "
        "more samples per second on either.</p></details></div>"
    )


# -- the input pipeline ------------------------------------------------------------------------
LANE_FILLS = {"load": CPU_COLOUR, "copy": "#999999", "compute": GPU_COLOUR}


def pipeline_timeline_svg(
    pipeline, batches: int = 8, until: float | None = None, scale: float | None = None
) -> str:
    """The pipeline's lanes, load (one row per worker), copy and compute, over ``batches``
    batches, drawn up to the moment ``until`` (ms; None: to the end) on an axis of
    ``scale`` ms (None: the whole run). Each bar carries its batch number; each lane is
    named in words, never by colour alone."""
    spans = pipeline.spans(batches)
    end = max(s.end for s in spans)
    until = end if until is None else until
    scale = max(scale or end, 1e-9)
    workers = pipeline.settings.workers
    load_rows = max(workers, 1)
    rows = [
        (f"load, worker {k + 1}" if workers else "load, main process") for k in range(load_rows)
    ]
    rows += ["copy to GPU", "compute on GPU"]
    left, right, top, row_h = 150, 620, 10, 26
    height = top + row_h * len(rows) + 34
    width = 640

    def x(ms):
        return left + ms / scale * (right - left)

    def row_of(span):
        return span.row if span.stage == "load" else load_rows + STAGE_ROW[span.stage]

    done = sum(1 for s in spans if s.stage == "compute" and s.end <= until)
    summary = (
        f"Timeline of {batches} batches through load, copy and compute: "
        f"{done} of {batches} computed after {min(until, end):.3g} ms."
    )
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(summary)}" '
        'font-family="Helvetica, Arial, sans-serif" font-size="12">',
        f'<rect width="{width}" height="{height}" fill="#ffffff"/>',
    ]
    for i, name in enumerate(rows):
        y = top + i * row_h
        parts.append(
            f'<text x="{left - 8}" y="{y + 17}" text-anchor="end" fill="{INK}">{escape(name)}</text>'
            f'<rect x="{left}" y="{y + 3}" width="{right - left}" height="{row_h - 6}" '
            'fill="#f4f4f4"/>'
        )
    for span in spans:
        if span.start >= until or span.end <= span.start:
            continue
        shown_end = min(span.end, until)
        y = top + row_of(span) * row_h
        x0, x1 = x(span.start), x(shown_end)
        fill = LANE_FILLS[span.stage]
        ink = "#ffffff" if span.stage == "compute" else INK
        parts.append(
            f'<rect x="{x0:.1f}" y="{y + 3}" width="{max(x1 - x0, 0.5):.1f}" '
            f'height="{row_h - 6}" fill="{fill}" stroke="#ffffff" stroke-width="1"/>'
        )
        if x1 - x0 >= 12:
            parts.append(
                f'<text x="{(x0 + x1) / 2:.1f}" y="{y + 17}" text-anchor="middle" '
                f'fill="{ink}" font-size="11">{span.batch + 1}</text>'
            )
    axis = top + row_h * len(rows) + 4
    parts.append(f'<line x1="{left}" y1="{axis}" x2="{right}" y2="{axis}" stroke="{INK}"/>')
    for tick in _ticks(scale):
        if tick <= scale:
            parts.append(
                f'<text x="{x(tick):.1f}" y="{axis + 14}" text-anchor="middle">{tick:g}</text>'
            )
    parts.append(f'<text x="{right}" y="{axis + 28}" text-anchor="end">ms</text>')
    if until < end:
        parts.append(
            f'<line x1="{x(until):.1f}" y1="{top}" x2="{x(until):.1f}" y2="{axis}" '
            f'stroke="{INK}" stroke-dasharray="3 3"/>'
        )
    parts.append("</svg>")
    return "".join(parts)


STAGE_ROW = {"copy": 0, "compute": 1}


def pipeline_table_html(pipelines) -> str:
    """One row per (label, pipeline): time per batch, bottleneck and the GPU's busy share."""
    rows = "".join(
        f"<tr><td>{escape(label)}</td><td>{p.steady_ms():.3g} ms</td>"
        f"<td>{escape(p.bottleneck())}</td><td>{p.gpu_busy():.0%}</td></tr>"
        for label, p in pipelines
    )
    return (
        '<table class="pipeline-table"><thead><tr><th>settings</th><th>time per batch</th>'
        f"<th>bottleneck</th><th>GPU busy</th></tr></thead><tbody>{rows}</tbody></table>"
    )


def pipeline_fallback_html(pipelines, best) -> str:
    """What a reader sees where the live timeline cannot run (GitHub, nbviewer): what it
    shows, its controls and the question, with the answers folded away."""
    return (
        '<div class="pipeline-fallback">'
        "<p><b>The pipeline timeline</b> runs in a running notebook (run this one, or open it in "
        "Colab or Binder). It draws 8 batches through three lanes, <i>load</i> on the CPU, "
        "<i>copy</i> over the link and <i>compute</i> on the GPU, with made-up speeds or the "
        "speeds of your machine. Controls: <i>Loader workers</i> (0: the main "
        "process loads each batch, and the stages run one after another), <i>Pinned "
        "memory</i>, <i>Copy on a side stream</i>, <i>Copied as</i> (uint8 or float32) and "
        "<b>Run</b>.</p>"
        "<p>Predict before you run it: with the made-up speeds, which settings keep the GPU "
        "busy all the time, and which stage holds it back with the defaults?</p>"
        "<details><summary>Answer: the settings as a table, and the best one drawn</summary>"
        + pipeline_table_html(pipelines)
        + pipeline_timeline_svg(best)
        + "</details></div>"
    )


# -- a profiler trace's timeline ------------------------------------------------------------
RANGE_FILLS = ("#e6e6e6", "#c4c4c4", "#a8a8a8", "#a8a8a8")


def _lane_fill(lane: str) -> str:
    return GPU_COLOUR if lane.startswith("GPU") else CPU_COLOUR


def _depths(events) -> dict:
    """Each event's nesting depth on its lane: 0 for an outermost one."""
    depth, open_ends = {}, {}
    for event in sorted(events, key=lambda e: (e.start_us, -e.dur_us)):
        stack = open_ends.setdefault((event.lane, event.cat in {"user_annotation"}), [])
        while stack and stack[-1] <= event.start_us:
            stack.pop()
        depth[event] = len(stack)
        stack.append(event.end_us)
    return depth


def trace_timeline_svg(events, start_us: float, end_us: float, current=None, lanes=None) -> str:
    """The trace's lanes between ``start_us`` and ``end_us``: for each lane its
    ``record_function`` ranges (grey, when it has any) above its work (orange on a CPU
    thread, blue on a GPU stream; nested CPU operators drawn inset, deeper ones lower).
    ``current`` is outlined in black. Every row is named in words."""
    from .trace_timeline import RANGES, WORK
    from .trace_timeline import lanes as lanes_of

    names = lanes or lanes_of([e for e in events if e.cat in WORK | RANGES])
    rows = []
    for lane in names:
        if any(e.lane == lane and e.cat in RANGES for e in events):
            rows.append((lane, "ranges", f"{lane}: ranges"))
        rows.append((lane, "work", lane))
    left, right, top, row_h = 170, 700, 10, 30
    width, height = 720, top + row_h * len(rows) + 36
    span = max(end_us - start_us, 1e-9)

    def x(us):
        return left + (min(max(us, start_us), end_us) - start_us) / span * (right - left)

    shown = [e for e in events if e.end_us > start_us and e.start_us < end_us]
    depth = _depths([e for e in shown if e.cat in WORK | RANGES])
    where = f" The outlined event: {escape(current.name)}." if current is not None else ""
    summary = (
        f"Timeline of {len(names)} lane{'s' * (len(names) != 1)} from "
        f"{start_us / 1e3:.3f} ms to {end_us / 1e3:.3f} ms: {', '.join(names)}.{where}"
    )
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(summary)}" '
        'font-family="Helvetica, Arial, sans-serif" font-size="12">',
        f'<rect width="{width}" height="{height}" fill="#ffffff"/>',
    ]
    for i, (_lane, _kind, label) in enumerate(rows):
        y = top + i * row_h
        parts.append(
            f'<text x="{left - 8}" y="{y + 19}" text-anchor="end" fill="{INK}">{escape(label)}</text>'
            f'<rect x="{left}" y="{y + 3}" width="{right - left}" height="{row_h - 6}" '
            'fill="#f4f4f4"/>'
        )
    row_of = {(lane, kind): i for i, (lane, kind, _label) in enumerate(rows)}
    outline, labels = "", []  # labels go on top of every bar, the outline on top of all
    for event in sorted(shown, key=lambda e: depth.get(e, 0)):
        kind = "ranges" if event.cat in RANGES else "work" if event.cat in WORK else None
        if kind is None or (event.lane, kind) not in row_of:
            continue
        x0, x1 = x(event.start_us), x(event.end_us)
        if depth.get(event, 0) > 0 and x1 - x0 < 1 and event != current:
            continue  # under a pixel, inside a drawn parent: nothing to see, only bytes to send
        inset = min(depth.get(event, 0), 3) * 4
        y = top + row_of[(event.lane, kind)] * row_h + 3 + inset
        h = row_h - 6 - inset
        level = min(depth.get(event, 0), 3)
        fill = RANGE_FILLS[level] if kind == "ranges" else _lane_fill(event.lane)
        parts.append(
            f'<rect x="{x0:.1f}" y="{y}" width="{max(x1 - x0, 0.5):.1f}" height="{h}" '
            f'fill="{fill}" stroke="#ffffff" stroke-width="0.5"><title>'
            f"{escape(event.name)}</title></rect>"
        )
        labelled = level == 1 if kind == "ranges" else level == 0
        if x1 - x0 >= 40 and labelled:
            fits = int((x1 - x0 - 6) / 6.5)
            label = event.name if len(event.name) <= fits else event.name[: fits - 1] + "…"
            ink = "#ffffff" if fill == GPU_COLOUR else INK
            labels.append(
                f'<text x="{x0 + 3:.1f}" y="{y + h / 2 + 4:.1f}" fill="{ink}" '
                f'font-size="11">{escape(label)}</text>'
            )
        if event == current:
            outline = (
                f'<rect x="{x0 - 1:.1f}" y="{y - 1}" width="{max(x1 - x0, 0.5) + 2:.1f}" '
                f'height="{h + 2}" fill="none" stroke="{INK}" stroke-width="2.5"/>'
            )
    parts += labels
    parts.append(outline)
    axis = top + row_h * len(rows) + 4
    parts.append(f'<line x1="{left}" y1="{axis}" x2="{right}" y2="{axis}" stroke="{INK}"/>')
    parts.append(
        f'<text x="{left}" y="{axis + 14}" text-anchor="start">{start_us / 1e3:.3f}</text>'
        f'<text x="{right}" y="{axis + 14}" text-anchor="end">{end_us / 1e3:.3f}</text>'
        f'<text x="{(left + right) / 2}" y="{axis + 28}" text-anchor="middle">ms from the '
        "first event of the trace</text></svg>"
    )
    return "".join(parts)


def lane_summary_html(summaries) -> str:
    """One row per lane: busy time, busy share and the longest idle gap, in ms."""
    rows = "".join(
        f"<tr><td>{escape(s.lane)}</td><td>{s.busy_us / 1e3:.3g} ms of {s.window_us / 1e3:.3g} ms"
        f"</td><td>{s.share:.0%}</td><td>{s.gap_us / 1e3:.3g} ms, from {s.gap_start_us / 1e3:.3f}"
        f" to {s.gap_end_us / 1e3:.3f} ms</td></tr>"
        for s in summaries
    )
    return (
        '<table class="trace-summary"><thead><tr><th>lane</th><th>busy</th><th>busy share</th>'
        f"<th>longest idle gap</th></tr></thead><tbody>{rows}</tbody></table>"
    )


def trace_fallback_html() -> str:
    """What a reader sees where the live timeline cannot run (GitHub, nbviewer): what it
    draws and its controls, and the question. It shows no trace: a saved notebook's trace
    would be one machine's, and the lesson records yours."""
    return (
        '<div class="trace-fallback">'
        "<p><b>Your trace, as a timeline.</b> In a running notebook (run this one, or open it "
        "in Colab or Binder) this draws the trace the cells above recorded on your machine: one "
        "lane per CPU thread, and on a GPU one lane per CUDA stream, each named in words, with "
        "the <code>record_function</code> ranges (load, normalize, copy, forward, backward, "
        "optimizer, read loss) above the operators they hold. Controls: <i>Step</i> (one "
        "recorded step, or all of them), <i>Lane</i> (the lane to step through), <i>Zoom</i>, "
        "and the buttons <b>Previous event</b>, <b>Next event</b> and <b>Longest gap</b>, each "
        "reachable with Tab. A live line names the chosen event in words; a table gives each "
        "lane's busy time, its busy share of the step and its longest idle gap.</p>"
        "<p>Predict, then look: in one step of the slow loop, while <code>load</code> runs, is "
        "the CPU thread working or waiting? And is its longest gap long or short?</p></div>"
    )
