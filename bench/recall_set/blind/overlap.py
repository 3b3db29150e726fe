"""Diagnostic only: how much of each question's vocabulary appears in its evidence turns (lexical overlap)."""
import json, re, statistics, collections
STOP=set('what when where which who whom whose why how does did do is are was were the a an of to in on for and or with at by from that this his her their its about after before into over than then them they she he it be been being has have had not any also just like only into your you our out up down more most some such very can could would should will may might much many there here'.split())
def words(t): return {w for w in re.findall(r"[a-z0-9]+", t.lower()) if len(w)>2 and w not in STOP}
d=json.load(open('blind_recall.json'))
for s in d:
    c=s['conversation']; txt={}
    for k,v in c.items():
        if isinstance(v,list):
            for t in v: txt[t['dia_id']]=t['text']
    byc=collections.defaultdict(list)
    for q in s['qa']:
        qw=words(q['question']); ew=set().union(*[words(txt[e]) for e in q['evidence']])
        byc[q['category']].append(len(qw&ew)/max(len(qw),1))
    print(s['sample_id'], ' '.join('cat%d: mean %.2f'%(k,statistics.mean(v)) for k,v in sorted(byc.items())))
