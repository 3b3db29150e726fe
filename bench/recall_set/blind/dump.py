import json,sys
d=json.load(open('/work/blind/recall/blind_recall.json'))
c=d[int(sys.argv[1])-1]['conversation']
i=1
while 'session_%d'%i in c:
    print('##',i,c['session_%d_date_time'%i])
    for t in c['session_%d'%i]: print(t['dia_id'],t['speaker'].split()[0]+':',t['text'])
    i+=1
