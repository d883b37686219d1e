"""Judge a Tempest run of scripts/conformance against a list of expected failures.

Usage: expected_results.py PHASE SUBUNIT RUN_DIR LOAD_LIST EXPECTED_FILE

EXPECTED_FILE holds ``<test uuid> | <test> | <reason>`` lines (``#`` comments): the tests OpenKeel cannot
pass yet, reported without gating. Every other test of LOAD_LIST gates: the exit status is 1 when one of them
failed or did not run. A class that failed in setUpClass stands for its tests (expected when all of them
are). Writes RUN_DIR/PHASE-results.txt (one line per test, the last traceback line of a failure; NOW-PASSES
for an expected failure that passed: take it off the list), PHASE.summary and PHASE.expected.

Run with the tempest venv's Python (python-subunit, testtools).
"""

import collections
import os
import re
import sys

import subunit
import testtools

phase, path, run, listed, expected_file = sys.argv[1:]


def read_lines(name):
    with open(name) as f:
        return f.read().splitlines()


def write(name, text):
    with open(name, 'w') as f:
        f.write(text)


status, tb = {}, collections.defaultdict(bytes)


class R(testtools.StreamResult):
    def status(self, test_id=None, test_status=None, file_name=None, file_bytes=None, **kw):
        if test_id and file_name == 'traceback' and file_bytes:
            tb[test_id] += file_bytes
        if test_id and test_status in ('success', 'fail', 'skip', 'xfail', 'uxsuccess'):
            status[test_id] = test_status


with open(path, 'rb') as f:
    r = R()
    r.startTestRun()
    subunit.ByteStreamToStreamResult(f, non_subunit_name='stdout').run(r)
    r.stopTestRun()
reasons = {}
for line in read_lines(expected_file):
    if line.strip() and not line.startswith('#'):
        uuid, _name, reason = (part.strip() for part in line.split('|', 2))
        reasons[uuid] = reason


def expected(tid):
    return next((r for u, r in reasons.items() if f'id-{u}' in tid or f'({u}' in tid), None)


word = {'success': 'passed', 'fail': 'failed', 'skip': 'skipped', 'xfail': 'passed', 'uxsuccess': 'failed'}
gating, known = collections.Counter(), collections.Counter()
lines, now_pass = [], []
tests = [t.strip() for t in read_lines(listed) if t.strip()]
for tid, st in sorted(status.items()):
    w = word[st]
    members = [t for t in tests if re.sub(r'^setUpClass \((.*)\)$', r'\1', tid) + '.' in t] \
        if tid.startswith('setUpClass') else [tid]
    why = [expected(t) for t in members]
    is_expected = bool(members) and all(why)
    (known if is_expected else gating)[w] += 1
    if is_expected and w == 'passed':
        now_pass.append(tid)
    last = ''
    if w == 'failed':
        text = tb[tid].decode('utf-8', 'replace').strip().splitlines()
        last = next((t for t in reversed(text) if t.strip()), '')[:300]
    tag = f'EXPECTED ({why[0]}) ' if is_expected else ''
    lines.append(f'{w.upper():8} {tag}{tid}' + (f'\n         {last}' if last else ''))
ran = {re.sub(r'^setUpClass \((.*)\)$', r'\1', t) for t in status}
missing = sorted(t for t in tests if t not in status and not any(t.startswith(c + '.') for c in ran)
                 and not expected(t))
for t in missing:
    lines.append(f'NOT-RUN  {t}')
listname = 'tests/conformance/' + os.path.basename(expected_file)
for t in now_pass:
    lines.append(f'NOW-PASSES {t}: take it off {listname}')
write(f'{run}/{phase}-results.txt', '\n'.join(lines) + '\n')
line = f'{phase}: {gating["passed"]} passed, {gating["failed"]} failed, {gating["skipped"]} skipped'
print(line)
write(f'{run}/{phase}.summary', line + '\n')
write(f'{run}/{phase}.expected',
    f'non-gating {phase} tests OpenKeel cannot pass yet ({listname}): '
    f'{known["passed"]} passed, {known["failed"]} failed, {known["skipped"]} skipped\n')
sys.exit(0 if gating['failed'] == 0 and not missing else 1)
