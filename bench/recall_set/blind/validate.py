"""Validate blind_recall.json: loads, session date_times, dia_id form/uniqueness, evidence exists, categories 1-5, counts."""
import json, re, sys, collections, os
P = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'blind_recall.json')
errs = []
data = json.load(open(P, encoding='utf-8'))
DT = re.compile(r'^(1[0-2]|[1-9]):[0-5]\d (am|pm) on ([1-9]|[12]\d|3[01]) (January|February|March|April|May|June|July|August|September|October|November|December), \d{4}$')
tot = collections.Counter()
print('file:', P)
for s in data:
    sid = s.get('sample_id'); c = s['conversation']; ids = set(); nturn = 0
    a, b = c.get('speaker_a'), c.get('speaker_b')
    if not a or not b or a == b: errs.append('%s: bad speakers' % sid)
    sess = sorted(int(m.group(1)) for k in c for m in [re.match(r'^session_(\d+)$', k)] if m)
    if sess != list(range(1, len(sess) + 1)): errs.append('%s: session numbering %s' % (sid, sess))
    for n in sess:
        dt = c.get('session_%d_date_time' % n)
        if not dt: errs.append('%s: session %d has no date_time' % (sid, n))
        elif not DT.match(dt): errs.append('%s: session %d bad date_time %r' % (sid, n, dt))
        for i, t in enumerate(c['session_%d' % n], 1):
            nturn += 1
            d = t.get('dia_id')
            if d != 'D%d:%d' % (n, i): errs.append('%s: bad dia_id %r (expected D%d:%d)' % (sid, d, n, i))
            if d in ids: errs.append('%s: duplicate dia_id %s' % (sid, d))
            ids.add(d)
            if t.get('speaker') not in (a, b): errs.append('%s: %s unknown speaker' % (sid, d))
            if not isinstance(t.get('text'), str) or not t['text'].strip(): errs.append('%s: %s empty text' % (sid, d))
    cats = collections.Counter(); qs = set()
    for j, q in enumerate(s['qa']):
        if not isinstance(q.get('question'), str) or not q['question'].strip(): errs.append('%s q%d: no question' % (sid, j))
        if q['question'] in qs: errs.append('%s q%d: duplicate question' % (sid, j))
        qs.add(q['question'])
        if not isinstance(q.get('answer'), str) or not q['answer'].strip(): errs.append('%s q%d: answer not a non-empty string' % (sid, j))
        if q.get('category') not in (1, 2, 3, 4, 5): errs.append('%s q%d: bad category %r' % (sid, j, q.get('category')))
        ev = q.get('evidence')
        if not ev: errs.append('%s q%d: no evidence' % (sid, j))
        for e in ev or []:
            if e not in ids: errs.append('%s q%d: evidence %s does not exist' % (sid, j, e))
        if ev and len(set(ev)) != len(ev): errs.append('%s q%d: repeated evidence' % (sid, j))
        cats[q.get('category')] += 1
    tot.update(cats)
    nq = len(s['qa'])
    print('%s: %s & %s | sessions %d | turns %d | questions %d | by category %s' % (
        sid, a, b, len(sess), nturn, nq, ', '.join('%d:%d (%.0f%%)' % (k, cats[k], 100.0 * cats[k] / max(nq, 1)) for k in range(1, 6))))
    print('   dates: %s .. %s' % (c.get('session_1_date_time'), c.get('session_%d_date_time' % len(sess))))
n = sum(tot.values())
print('TOTAL: samples %d | questions %d | by category %s' % (len(data), n, ', '.join('%d:%d' % (k, tot[k]) for k in range(1, 6))))
print('ERRORS: %d' % len(errs))
for e in errs: print('  ' + e)
sys.exit(1 if errs else 0)
