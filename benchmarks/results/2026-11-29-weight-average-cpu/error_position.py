"""Where in a sentence Whisper's word errors fall: each reference word is aligned to the heard
words by edit distance and counted wrong when substituted or deleted, by its position (first,
second, last, the rest). Reads trial folders' heard.json ([reference, heard] pairs).

    python error_position.py 'TRIALS/lr3-s*/heard.json' ...
"""
import glob
import json
import re
import sys


def norm(s): return re.sub(r"[^a-z' ]"," ",s.lower()).split()
def align(r,h):
    # levenshtein with backtrace; returns per-ref-word error flag
    n,m=len(r),len(h)
    D=[[0]*(m+1) for _ in range(n+1)]
    for i in range(n+1): D[i][0]=i
    for j in range(m+1): D[0][j]=j
    for i in range(1,n+1):
        for j in range(1,m+1):
            D[i][j]=min(D[i-1][j]+1,D[i][j-1]+1,D[i-1][j-1]+(r[i-1]!=h[j-1]))
    err=[0]*n; i,j=n,m
    while i>0 or j>0:
        if i>0 and j>0 and D[i][j]==D[i-1][j-1]+(r[i-1]!=h[j-1]):
            err[i-1]=int(r[i-1]!=h[j-1]); i-=1;j-=1
        elif i>0 and D[i][j]==D[i-1][j]+1: err[i-1]=1; i-=1
        else:
            # insertion: charge to neighbour ref word
            if i>0: err[i-1]=max(err[i-1],0)
            j-=1
    return err
for pat in sys.argv[1:]:
    pos={}
    for f in glob.glob(pat):
        for ref,hyp in json.load(open(f)):
            r,h=norm(ref),norm(hyp)
            e=align(r,h)
            n=len(r)
            for k,x in enumerate(e):
                key='first' if k==0 else 'second' if k==1 else 'last' if k==n-1 else 'middle'
                a=pos.setdefault(key,[0,0]); a[0]+=x; a[1]+=1
    print(pat, {k:f"{v[0]}/{v[1]}={v[0]/v[1]:.2f}" for k,v in pos.items()})
