"""CI: the installed environment against PyPI's advisory data (pip-audit); fails on a known advisory.

    python .ci/audit.py ENV   (ENV: the virtual environment to audit, e.g. .venv)

pip-audit runs from its own virtual environment (``.ci/.audit``, made here), so that neither it
nor what it needs joins the course's environment. It reads the advisories from the network; where
they cannot be reached (no route, or an index without PyPI's JSON API), this says so in one line
and passes: an audit that could not look is no finding. A known advisory fails the run and is
named with the versions that fix it.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
TOOL = HERE / ".audit"


def verdict(report: dict | None, why: str = "") -> tuple[int, list[str]]:
    """(exit status, lines to print) for pip-audit's JSON ``report`` (None: it gave none)."""
    if not isinstance(report, dict) or not isinstance(report.get("dependencies"), list):
        return 0, [f"advisory audit: the advisory data could not be reached, nothing audited ({why or 'no report'})"]
    deps = [d for d in report["dependencies"] if isinstance(d, dict)]
    audited = [d for d in deps if "skip_reason" not in d]
    if not audited:
        return 0, [f"advisory audit: the advisory data could not be reached, nothing audited "
                   f"({len(deps)} packages skipped, e.g. {deps[0].get('skip_reason', '?') if deps else 'none listed'})"]
    found = [(d.get("name"), d.get("version"), v) for d in audited for v in d.get("vulns") or []]
    if not found:
        return 0, [f"advisory audit: {len(audited)} packages audited, no known advisory "
                   f"({len(deps) - len(audited)} could not be looked up)"]
    lines = [f"advisory audit: {len(found)} known advisor{'y' if len(found) == 1 else 'ies'}:"]
    for name, version, vuln in found:
        fixed = ", ".join(vuln.get("fix_versions") or []) or "no fixed version yet"
        lines.append(f"  {name} {version}: {vuln.get('id')} (fixed in {fixed})")
    return 1, lines


def _site_packages(env: Path) -> Path:
    (found,) = sorted(env.glob("lib/python3*/site-packages"))
    return found


def main(env: str) -> int:
    pip_audit = TOOL / "bin" / "pip-audit"
    if not pip_audit.exists():
        made = subprocess.run([sys.executable, "-m", "venv", str(TOOL)]).returncode == 0 and \
            subprocess.run([str(TOOL / "bin" / "pip"), "install", "-q", "pip-audit"],
                           capture_output=True).returncode == 0
        if not made:
            print("advisory audit: pip-audit could not be installed, nothing audited")
            return 0
    run = None
    try:
        run = subprocess.run([str(pip_audit), "--path", str(_site_packages(Path(env))), "--skip-editable",
                              "--format", "json", "--progress-spinner", "off", "--timeout", "20"],
                             capture_output=True, text=True, timeout=600)
        report = json.loads(run.stdout)
    except (subprocess.TimeoutExpired, ValueError):  # no JSON: it could not finish
        report = None
    why = "timed out" if run is None else (run.stderr.strip().splitlines() or [""])[-1][:200]
    status, lines = verdict(report, why)
    print("\n".join(lines))
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else ".venv"))
