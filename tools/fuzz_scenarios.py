#!/usr/bin/env python3
"""fuzz_scenarios.py [RUNS] [SEED]: mutate the shipped scenarios at random (wrong types, huge and
negative numbers, deleted and misspelled keys, flipped characters) and run build/app/monarch-sim
on each. Every run must exit 0 or 2, never crash, and every error line must stay one short line.
Run from the repository root after building. Exit status 1 when a run misbehaves."""
import json, random, subprocess, glob, os, sys, tempfile
RUNS = int(sys.argv[1]) if len(sys.argv) > 1 else 600
random.seed(int(sys.argv[2]) if len(sys.argv) > 2 else 7)
B = './build/app/monarch-sim'
tmpdir = tempfile.TemporaryDirectory(prefix='monarch_fuzz_')
tmp = os.path.join(tmpdir.name, 'fz.json')
files=sorted(glob.glob('scenarios/*.json'))
vals=[None, True, False, 0, -1, 1, 3, 7, 2**63, -2**63, 2**64+5, 1e15, 1.5, -0.0, "", "x", "H100-SXM", "1f1b", [], [1], {}, {"a":1}, "interleaved-1f1b", 8, 64, 1e308]
def paths(o, p=()):
    yield p
    if isinstance(o, dict):
        for k,v in o.items(): yield from paths(v, p+(k,))
    elif isinstance(o, list):
        for i,v in enumerate(o): yield from paths(v, p+(i,))
bad=0; n=0; rcs={}
for it in range(RUNS):
    j=json.load(open(random.choice(files)))
    ps=[p for p in paths(j) if p]
    for _ in range(random.randint(1,3)):
        p=random.choice(ps)
        node=j
        try:
            for k in p[:-1]: node=node[k]
            r=random.random()
            if r<0.2 and isinstance(node, dict): node.pop(p[-1], None)
            elif r<0.3 and isinstance(node, dict): node[p[-1]+'x' if isinstance(p[-1],str) else p[-1]]=random.choice(vals)
            else: node[p[-1]]=random.choice(vals)
        except Exception: pass
    text=json.dumps(j)
    if random.random()<0.2:
        t=list(text); i=random.randrange(len(t)); t[i]=random.choice('{}[]",:0-e\\x'); text=''.join(t)
    open(tmp,'w').write(text)
    res=subprocess.run([B,tmp,'--quiet'],capture_output=True,text=True, errors='replace')
    rcs[res.returncode]=rcs.get(res.returncode,0)+1
    if res.returncode not in (0,2) or (res.returncode==2 and 'error' not in res.stderr) or any(len(l)>400 for l in res.stderr.splitlines()):
        bad+=1; print('BAD', res.returncode, text[:300], res.stderr[:500])
print('exit statuses', rcs, 'misbehaving runs', bad)
sys.exit(1 if bad else 0)
