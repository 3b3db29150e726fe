"""Build blind_recall.json from src/c<N>.txt (conversation) and src/q<N>.txt (questions).
Conversation lines: 'X: text' or 'X[label]: text' (X = speaker code); '## <date_time>' starts a session.
Question lines: 'category | ev1,ev2 | question | answer' where ev = label or D<s>:<t>."""
import json, re, os, sys
HERE = os.path.dirname(os.path.abspath(__file__))
def parse_conv(path):
    codes, sessions, labels = {}, [], {}
    for ln in open(path, encoding='utf-8'):
        ln = ln.rstrip('\n')
        if not ln.strip(): continue
        if ln.startswith('#SPEAKERS'):
            for part in ln.split(' ', 1)[1].split('|'):
                k, v = part.split('='); codes[k.strip()] = v.strip()
            continue
        if ln.startswith('## '):
            sessions.append({'dt': ln[3:].strip(), 'turns': []}); continue
        m = re.match(r'^([A-Z])(?:\[([a-z0-9_]+)\])?: (.+)$', ln)
        if not m: sys.exit('bad line: %r' % ln)
        code, lab, text = m.groups()
        s = sessions[-1]; sn = len(sessions); tn = len(s['turns']) + 1
        did = 'D%d:%d' % (sn, tn)
        if lab:
            if lab in labels: sys.exit('dup label ' + lab)
            labels[lab] = did
        s['turns'].append({'speaker': codes[code], 'dia_id': did, 'text': text})
    return codes, sessions, labels
def parse_q(path, labels):
    qa = []
    for ln in open(path, encoding='utf-8'):
        ln = ln.strip()
        if not ln or ln.startswith('#'): continue
        parts = [p.strip() for p in ln.split(' | ')]
        if len(parts) != 4: sys.exit('bad q line: %r' % ln)
        c, ev, q, a = parts
        evs = []
        for e in ev.split(','):
            e = e.strip()
            if re.match(r'^D\d+:\d+$', e): evs.append(e)
            elif e in labels: evs.append(labels[e])
            else: sys.exit('unknown evidence %r in %r' % (e, q))
        qa.append({'question': q, 'answer': a, 'evidence': evs, 'category': int(c)})
    return qa
out = []
n = 1
while os.path.exists(os.path.join(HERE, 'src', 'c%d.txt' % n)):
    codes, sessions, labels = parse_conv(os.path.join(HERE, 'src', 'c%d.txt' % n))
    names = list(codes.values())
    conv = {'speaker_a': names[0], 'speaker_b': names[1]}
    for i, s in enumerate(sessions, 1):
        conv['session_%d_date_time' % i] = s['dt']; conv['session_%d' % i] = s['turns']
    qp = os.path.join(HERE, 'src', 'q%d.txt' % n)
    qa = parse_q(qp, labels) if os.path.exists(qp) else []
    out.append({'sample_id': 'blind-%d' % n, 'conversation': conv, 'qa': qa})
    n += 1
json.dump(out, open(os.path.join(HERE, 'blind_recall.json'), 'w', encoding='utf-8'), ensure_ascii=False, indent=1)
print('built', len(out), 'samples')
