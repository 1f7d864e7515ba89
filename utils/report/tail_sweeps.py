"""The tails' sweeps in words (notebooks 05, 06 and 07): where each regime of a sweep over the rows begins, and
what a sweep over the group width shows, read from the entries of a sweep_tails, sweep_activations or
sweep_min_bias record. utils.chapters.memory makes the entries and re-exports these for the chapters (mc.)."""
from __future__ import annotations


def sweep_regimes(entries: list[dict], ours: str, copy_GBps: float, sms: int, blocks_per_row: float) -> str:
    """Where each regime of the rows sweep begins, read from its entries: launch-bound while ours stays within 1.5x of
    its time at the fewest rows; a block per SM from some rows on; bandwidth-bound once ours moves half and 80% of
    the copy bandwidth; and the sizes whose p20 and p80 lie over 2x apart (times to read as a range)."""
    pts = sorted((e["rows"], e["median_ms"], e["GBps"], e.get("p20_ms"), e.get("p80_ms")) for e in entries
                 if e["sweep"] == "rows" and e["contender"] == ours)
    if not pts:
        return "No rows sweep of ours recorded."
    t0 = pts[0][1]
    flat = pts[0][0]
    for r, t, *_ in pts:  # the stretch from the fewest rows, up to the first size that takes longer
        if t > 1.5 * t0:
            break
        flat = r
    fill = next((r for r, *_ in pts if r * blocks_per_row >= sms), None)
    half = next((r for r, _, gb, *_ in pts if gb >= 0.5 * copy_GBps), None)
    full = next((r for r, _, gb, *_ in pts if gb >= 0.8 * copy_GBps), None)
    first = f"{pts[0][0]} row" + ("" if pts[0][0] == 1 else "s")
    if flat == pts[0][0]:
        text = [f"- **Launch-bound:** at {first} ours takes {1e3 * t0:.1f} us"
                + (f", and already more than 1.5x that at {pts[1][0]} rows." if len(pts) > 1 else ".")]
    else:
        text = [f"- **Launch-bound:** up to {flat} rows ours takes at most 1.5x its {1e3 * t0:.1f} us at {first}: "
                "the launch and one trip's latency, not the bytes, set the time."]
    if fill is not None:
        text.append(f"- **The SMs fill:** from {fill} rows the grid has a block for each of the {sms} SMs "
                    f"({fill} rows, {blocks_per_row:g} block{'' if blocks_per_row == 1 else 's'} each).")
    if half is not None:
        share = ("at least 80% of" if full == half else "at least half") + f" the copy bandwidth ({copy_GBps:.0f} GB/s)"
        later = f", from {full} rows at least 80%" if full is not None and full != half else ""
        text.append(f"- **Bandwidth-bound:** from {half} rows ours moves {share}{later}: from there the time grows "
                    "with the bytes.")
    else:
        text.append(f"- Ours never reaches half the copy bandwidth ({copy_GBps:.0f} GB/s) in this sweep.")
    wide = [(r, lo, hi) for r, _, _, lo, hi in pts if lo and hi and hi > 2 * lo]
    if wide:  # the widest spread named
        r, lo, hi = max(wide, key=lambda w: w[2] / w[1])
        text.append(f"- **Spread:** at {', '.join(str(w[0]) for w in wide)} rows this run's p20 and p80 of ours lie "
                    f"more than 2x apart (widest at {r} rows: {1e3 * lo:.1f} to {1e3 * hi:.1f} us). A call of a few "
                    "microseconds is timed with the host's launch of it, and the host was not quiet: read those "
                    "points as a range, and the edges above as approximate.")
    return "\n".join(text)


def width_regimes(entries: list[dict], ours: str, eager: str, copy_GBps: float, team_max: int = 256) -> str:
    """The group-width sweep in words, from its entries: ours' share of the copy bandwidth on the team path (groups
    up to team_max floats) and beyond it (the block path), and how many times faster than eager at each end."""
    by = {(e["contender"], e["group_width"]): e for e in entries if e["sweep"] == "group width"}
    widths = sorted({d for c, d in by if c == ours})
    if not widths:
        return "No group-width sweep of ours recorded."
    pct = {d: 100 * by[ours, d]["GBps"] / copy_GBps for d in widths}
    team = [d for d in widths if d <= team_max]
    text = []
    if team:
        text.append(f"- **Teams of lanes** (D = {team[0]} to {team[-1]}): ours at {min(pct[d] for d in team):.0f}-"
                    f"{max(pct[d] for d in team):.0f}% of the copy bandwidth.")
    for d in (d for d in widths if d > team_max):
        text.append(f"- **The block path** (D = {d}, a block per group): {pct[d]:.0f}%.")
    ends = [d for d in (widths[0], widths[-1]) if (eager, d) in by]
    if ends:
        text.append("- Against eager: " + ", ".join(
            f"{by[eager, d]['median_ms'] / by[ours, d]['median_ms']:.1f}x faster at D = {d}" for d in ends)
            + ".")
    return "\n".join(text)
