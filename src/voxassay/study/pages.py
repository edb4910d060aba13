"""Server-rendered pages of the rating app: plain HTML, one small script, one style sheet.

No external assets. Every value that comes from a study file or a request is escaped.
Nothing here ever receives a system name: callers pass only what a rater may see.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from html import escape
from typing import Any

STYLE = """
:root { color-scheme: light dark; --accent: #2364aa; }
body { font: 16px/1.5 system-ui, sans-serif; margin: 0; padding: 0 1rem; }
main { max-width: 46rem; margin: 1.5rem auto 4rem; }
main.wide { max-width: 80rem; }
details { margin-bottom: 1rem; }
h1 { font-size: 1.3rem; margin: 0 0 .5rem; }
h2 { font-size: 1.1rem; }
.progress { display: flex; gap: .75rem; align-items: center; margin-bottom: 1rem; }
.progress progress { flex: 1; height: .8rem; }
.context { padding: .6rem .8rem; border-left: 3px solid var(--accent); background: #8881; }
.players { display: flex; flex-wrap: wrap; gap: 1rem; margin: 1rem 0; }
.player { flex: 1 1 18rem; padding: .6rem; border: 1px solid #8886; border-radius: 6px; }
.player .slot { font-weight: 700; font-size: 1.2rem; margin-right: .5rem; }
audio { width: 100%; }
fieldset { border: 1px solid #8886; border-radius: 6px; margin: 1rem 0; }
legend { font-weight: 600; padding: 0 .3rem; }
.choices { display: flex; flex-wrap: wrap; gap: .4rem; }
.choices label { display: flex; flex-direction: column; align-items: center; min-width: 4.2rem;
  padding: .3rem .4rem; border: 1px solid #8886; border-radius: 6px; cursor: pointer; }
.choices label span { font-size: .8rem; text-align: center; }
button { font: inherit; padding: .5rem 1.4rem; border-radius: 6px; border: 0;
  background: var(--accent); color: #fff; cursor: pointer; }
button[disabled] { opacity: .45; cursor: not-allowed; }
button.secondary { background: #8884; color: inherit; }
.error { color: #b00020; font-weight: 600; }
.note { color: #888; font-size: .9rem; }
nav { margin-top: 1.5rem; display: flex; gap: 1rem; }
table { border-collapse: collapse; font-size: .85rem; margin: .5rem 0 1.5rem; }
th, td { border-bottom: 1px solid #8884; padding: .2rem .5rem; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.flag { color: #b00020; }
select { font: inherit; }
"""

SCRIPT = """
(function () {
  var t0 = performance.now();
  var form = document.querySelector('form[data-listen]');
  if (!form) { return; }
  var button = form.querySelector('button[type=submit]');
  var hint = document.getElementById('listen-hint');
  var players = Array.prototype.slice.call(document.querySelectorAll('audio[data-required]'));
  var heard = {};
  function ready() {
    if (form.getAttribute('data-listen') !== '1') { return true; }
    for (var i = 0; i < players.length; i++) { if (!heard[i]) { return false; } }
    return true;
  }
  function update() {
    var ok = ready();
    if (button) { button.disabled = !ok; }
    if (hint) { hint.hidden = ok; }
  }
  players.forEach(function (audio, i) {
    audio.addEventListener('ended', function () { heard[i] = true; update(); });
    audio.addEventListener('error', function () {
      var msg = document.getElementById('audio-error');
      if (msg) { msg.hidden = false; }
    });
  });
  update();
  form.addEventListener('submit', function (ev) {
    if (!ready()) { ev.preventDefault(); update(); return; }
    var ms = form.querySelector('input[name=response_ms]');
    if (ms) { ms.value = String(Math.round(performance.now() - t0)); }
    if (button) { setTimeout(function () { button.disabled = true; }, 0); }
  });
})();
"""


@dataclass
class EvalView:
    """What a rater sees of an eval."""

    id: str
    kind: str
    question: str
    min: int
    max: int
    labels: Mapping[int, str]
    ties: bool


def page(title: str, body: str, wide: bool = False) -> str:
    main = '<main class="wide">' if wide else "<main>"
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title>"
        '<link rel="stylesheet" href="/static/style.css"></head>'
        f"<body>{main}{body}</main>"
        '<script src="/static/app.js"></script></body></html>\n'
    )


def message_page(title: str, heading: str, text: str) -> str:
    return page(title, f"<h1>{escape(heading)}</h1><p>{escape(text)}</p>")


def _progress(done: int, total: int, label: str) -> str:
    return (
        f'<div class="progress"><progress value="{done}" max="{max(total, 1)}"></progress>'
        f'<span id="progress-text">{escape(label)}</span></div>'
    )


def _error(error: str | None) -> str:
    return f'<p class="error" role="alert">{escape(error)}</p>' if error else ""


def profile_page(
    title: str,
    fields: Sequence[Any],
    required: bool,
    prefer_not: str,
    error: str | None = None,
) -> str:
    rows = []
    for f in fields:
        opts = "".join(
            f'<option value="{escape(o)}">{escape(o)}</option>' for o in [*f.options, prefer_not]
        )
        rows.append(
            f'<p><label>{escape(f.label)}<br><select name="f.{escape(f.id)}" '
            f'{"required" if required else ""}><option value="">(choose)</option>{opts}'
            "</select></label></p>"
        )
    skip = (
        ""
        if required
        else '<button type="submit" name="skip" value="1" class="secondary" formnovalidate>'
        "Skip</button>"
    )
    body = (
        f"<h1>{escape(title)}</h1><h2>About you</h2>"
        "<p>These answers help us describe who took part. They are optional.</p>"
        f"{_error(error)}"
        '<form method="post" action="/rate/profile" id="profile">'
        + "".join(rows)
        + f'<p><button type="submit">Continue</button> {skip}</p></form>'
    )
    return page(title, body)


def headphone_page(
    title: str,
    instructions: str,
    trial_ids: Sequence[str],
    calibration: bool,
    attempts_left: int,
    error: str | None = None,
) -> str:
    cal = (
        "<p>First play this noise and set your volume to a comfortable level.</p>"
        '<audio controls preload="auto" src="/hp/cal"></audio>'
        if calibration
        else ""
    )
    trials = []
    for n, tid in enumerate(trial_ids, start=1):
        radios = "".join(
            f'<label><input type="radio" name="h.{escape(tid)}" value="{k}" required>'
            f"<span>tone {k}</span></label>"
            for k in (1, 2, 3)
        )
        trials.append(
            f'<fieldset class="trial"><legend>Sound {n}</legend>'
            f'<audio controls preload="auto" data-required src="/hp/{escape(tid)}"></audio>'
            f'<div class="choices">{radios}</div></fieldset>'
        )
    body = (
        f"<h1>{escape(title)}</h1><h2>Headphone check</h2>"
        f"<p>{escape(instructions)}</p>{cal}"
        "<p>Each sound has three tones. Which tone is the <strong>quietest</strong>? "
        f"Attempts left: {attempts_left}.</p>{_error(error)}"
        '<form method="post" action="/rate/headphones" id="headphones" data-listen="1">'
        + "".join(trials)
        + '<p id="listen-hint" class="note">Play each sound to the end first.</p>'
        '<p><button type="submit">Check</button></p></form>'
    )
    return page(title, body)


def _likert(ev: EvalView, current: float | None) -> str:
    choices = []
    for k in range(ev.min, ev.max + 1):
        checked = " checked" if current is not None and current == k else ""
        label = ev.labels.get(k, "")
        choices.append(
            f'<label><input type="radio" name="e.{escape(ev.id)}" value="{k}" required{checked}>'
            f"<strong>{k}</strong><span>{escape(label)}</span></label>"
        )
    return f'<div class="choices">{"".join(choices)}</div>'


def _pairwise(ev: EvalView, current: str | None) -> str:
    opts = [("a", "A"), ("b", "B")]
    if ev.ties:
        opts.insert(1, ("tie", "No preference"))
    choices = "".join(
        f'<label><input type="radio" name="e.{escape(ev.id)}" value="{v}" required'
        f"{' checked' if current == v else ''}><strong>{escape(text)}</strong></label>"
        for v, text in opts
    )
    return f'<div class="choices">{choices}</div>'


def task_page(
    title: str,
    *,
    task_id: str,
    position: int,
    total: int,
    done: int,
    context: str,
    slots: Sequence[str],
    evals: Sequence[EvalView],
    current: Mapping[str, Any],
    revise: bool,
    require_listen: bool,
    previous: str | None,
    instructions: str = "",
    error: str | None = None,
) -> str:
    players = "".join(
        '<div class="player">'
        + (f'<span class="slot">{slot.upper()}</span>' if slot != "x" else "")
        + f'<audio controls preload="auto" data-required src="/audio/{escape(task_id)}/{slot}">'
        "</audio></div>"
        for slot in slots
    )
    questions = []
    for ev in evals:
        widget = (
            _pairwise(ev, current.get(ev.id))
            if ev.kind == "pairwise"
            else _likert(ev, current.get(ev.id))
        )
        questions.append(f"<fieldset><legend>{escape(ev.question)}</legend>{widget}</fieldset>")
    nav = []
    if previous:
        nav.append(f'<a href="/rate/task/{escape(previous)}" id="previous">Previous item</a>')
    if revise:
        nav.append('<a href="/rate" id="current">Back to the current item</a>')
    heading = f"Item {position + 1} of {total}" + (" (changing your answer)" if revise else "")
    ctx = f'<p class="context">{escape(context)}</p>' if context else ""
    how = (
        f"<details{' open' if position == 0 and not revise else ''}><summary>Instructions"
        f"</summary><p>{escape(instructions)}</p></details>"
        if instructions
        else ""
    )
    body = (
        f"<h1>{escape(title)}</h1>{_progress(done, total, heading)}{how}{_error(error)}{ctx}"
        f'<section class="players">{players}</section>'
        '<p id="audio-error" class="error" hidden>The audio could not be played. '
        "Please reload the page.</p>"
        f'<form method="post" action="/rate/answer" id="answer" data-listen="{int(require_listen)}">'
        f'<input type="hidden" name="task" value="{escape(task_id)}">'
        '<input type="hidden" name="response_ms" value="">'
        f'<input type="hidden" name="revise" value="{int(revise)}">'
        + "".join(questions)
        + '<p id="listen-hint" class="note">Listen to the recording(s) to the end first.</p>'
        f'<p><button type="submit" id="submit">{"Save" if revise else "Next"}</button></p>'
        f"</form><nav>{''.join(nav)}</nav>"
    )
    return page(title, body)


def done_page(title: str, total: int, last_task: str | None) -> str:
    back = (
        f'<nav><a href="/rate/task/{escape(last_task)}" id="previous">Change an answer</a></nav>'
        if last_task
        else ""
    )
    return page(
        title,
        f"<h1>{escape(title)}</h1>{_progress(total, total, f'{total} of {total} done')}"
        '<h2 id="finished">Thank you!</h2><p>You have rated every item. You can close this page.</p>'
        + back,
    )


def instructions_block(text: str) -> str:
    return f'<p class="note">{escape(text)}</p>'


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]], num_from: int = 1) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = []
    for row in rows:
        cells = []
        for i, v in enumerate(row):
            cls = ' class="num"' if i >= num_from and isinstance(v, int | float) else ""
            text = "" if v is None else (f"{v:.2f}" if isinstance(v, float) else str(v))
            cells.append(f"<td{cls}>{escape(text)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def admin_page(title: str, status: Mapping[str, Any]) -> str:
    s = status["summary"]
    raters = status["raters"]
    items = status["items"]
    rater_rows = [
        [
            r["id"],
            r["source"],
            r["done"],
            r["assigned"],
            r["completion"],
            r["gold_n"],
            r["gold_accuracy"],
            r["median_response_ms"],
            r["headphones"],
            r["last_seen"] or "",
            ", ".join(r["flags"]),
        ]
        for r in raters
    ]
    item_rows = [
        [
            i["item"],
            i["kind"],
            i["system"] + (f" vs {i['system_b']}" if i["system_b"] else ""),
            "gold" if i["gold"] else "",
            i["raters_done"],
            i["raters_assigned"],
        ]
        for i in items
    ]
    links = '<a href="/admin/export.csv" id="export">Export ratings (CSV)</a>'
    if s.get("pairs"):
        links += ' <a href="/admin/subjective.json">Pairwise preferences (subjective.json)</a>'
    body = (
        f"<h1>{escape(title)}: admin</h1>"
        f"<p>{s['raters_started']} of {s['raters']} raters started, {s['raters_finished']} "
        f"finished; {s['ratings']} ratings; items with all their raters done: "
        f"{s['items_complete']} of {s['items']}.</p><p>{links}</p>"
        "<h2>Raters</h2>"
        + table(
            [
                "rater",
                "source",
                "done",
                "assigned",
                "completion",
                "gold n",
                "gold acc.",
                "median ms",
                "headphones",
                "last seen",
                "flags",
            ],
            rater_rows,
            num_from=2,
        )
        + "<h2>Items</h2>"
        + table(["item", "kind", "system(s)", "gold", "raters done", "assigned"], item_rows, 4)
    )
    return page(f"{title}: admin", body, wide=True)
