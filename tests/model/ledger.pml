/*
 * ledger-stream, ONE operation key: the decision table as implemented in
 * ledger_stream/domain/ (decide.py, transitions.py, effects.py, deadlines.py) and the connector
 * protocol as implemented in ledger_stream/connector/core.py (docs/design.md).
 *
 * Derived from the design review's reference model, with its fixes
 * C1-C6 built in and the rules the code added since: `not_called` (late grant, revocation),
 * uncounted lapses, a claimant that waits for its own claim's answer, effect reports that are
 * never dropped, unknown outcomes that end with an operator, deadlines, the fast path that
 * still waits for its answer. README.md beside this file maps each rule to its code.
 *
 * Actors: agents (intents), the processor (single writer, one ordered log, crash + rollback to
 * any earlier offset, deterministic re-emission), two connector instances in one consumer
 * group on the key's dispatch partition (crash, freeze/wake, rebalance with revocation), the
 * network (dropped responses, client time-outs before the target commits, requests that
 * linger), the target (variant a: deduplicates by key + exact lookup; variant b: neither),
 * lease expiry, the processor's deadline timer, the operator (resolutions; with HOLDFRZ, freezes
 * of the key's action in hold mode and their unfreezes).
 *
 * Time is abstract: lexp[n] says "the lease of attempt n has expired" (reference model).
 * Every option is a -D flag; check.sh builds one configuration, configs.txt lists those that
 * `make test` runs.
 */

/* ---------------------------------------------------------------- variant and workload */
#ifndef DEDUP
#define DEDUP 0      /* 1: target (a) dedups by idempotency key and answers lookups; 0: (b) neither */
#endif
#ifndef FAST
#define FAST 0       /* 1: fast path (core.py _job_for/_claim_recorded): call before the grant */
#endif
#ifndef NSAME
#define NSAME 1      /* agents submitting the same intent (1 or 2) */
#endif
#ifndef CONFLICT
#define CONFLICT 0   /* 1: one more agent submits the key with other material args */
#endif
/* ---------------------------------------------------------------- fault budgets (all 0 = none) */
#ifndef PCRASH
#define PCRASH 0     /* processor crash + restart from any earlier offset */
#endif
#ifndef CCRASH
#define CCRASH 0     /* connector SIGKILL at any point, restart as a new process */
#endif
#ifndef FRZ
#define FRZ 0        /* connector freeze (GC pause, VM stall) at any point, wake later */
#endif
#ifndef REB
#define REB 0        /* rebalance: the partition moves, the old owner's jobs are revoked */
#endif
#ifndef TFAIL
#define TFAIL 0      /* target rejects a request before commit (5xx: not_applied) */
#endif
#ifndef PERM
#define PERM 0       /* 1: a target rejection may also be permanent (failed) */
#endif
#ifndef NETF
#define NETF 0       /* response dropped after the target decided, or time-out before it did */
#endif
#ifndef SLOW
#define SLOW -1      /* leases that expire while a live claimant waits for its Grant (processor
                        or consumer lag); -1: unlimited (the lapse bound LAPMAX cuts the run) */
#endif
#ifndef TMR
#define TMR 1        /* deadline timers (deadlines.py): a bound on how many fire, not a fault */
#endif
#ifndef STALL
#define STALL 0      /* 1: the RESERVED deadline too (re-offers the same Dispatch, `stalled`) */
#endif
/* ---------------------------------------------------------------- policy and bounds */
#ifndef MAXATT
#define MAXATT 2     /* Policy.max_attempts: attempts that count (lapses do not) */
#endif
#ifndef LAPMAX
#define LAPMAX 2     /* model bound on lapses (uncounted not_called attempts): beyond it the run
                        is cut (ovf), like the reference's attempt bound */
#endif
#define NMAX (MAXATT + LAPMAX)
#ifndef LMAX
#define LMAX 18      /* events in the key's input log */
#endif
#ifndef DMAX
#define DMAX 18      /* records in the key's dispatch partition (the macros below cover 24) */
#endif
#ifndef CIDMAX
#define CIDMAX 12    /* claim ids minted */
#endif
#define NC 2
#define NREQ 3
/* ---------------------------------------------------------------- timing assumptions */
#ifndef GAPFRZ
#define GAPFRZ 1     /* a holder may freeze between its last lease check and the send */
#endif
#ifndef WIREFRZ
#define WIREFRZ 1    /* a holder may freeze while its request is on the wire */
#endif
#ifndef BOUNDED
#define BOUNDED 1    /* a request reaches the target or is lost before its lease expires */
#endif
#ifndef PERINC
#define PERINC 1     /* only with R_CLAIMID=0: instance id new per incarnation */
#endif
/* ---------------------------------------------------------------- the rules (1 = as implemented;
   0 = that rule removed, for the ablation runs) */
#ifndef R_CLAIMID
#define R_CLAIMID 1  /* claims carry a fresh claim id; every answer names it (C1) */
#endif
#ifndef R_DONE
#define R_DONE 1     /* Done for a claim whose attempt is not open (C2) */
#endif
#ifndef R_ATTEMPT
#define R_ATTEMPT 1  /* outcomes/results/resolutions act only for the current attempt (and an
                        outcome only from its granted claim) (C3) */
#endif
#ifndef R_LEASEREP
#define R_LEASEREP 1 /* the lease covers the call and the outcome report (C5) */
#endif
#ifndef R_LATEOUT
#define R_LATEOUT 1  /* the holder's definite outcome counts in RECONCILING/NEEDS_OPERATOR (C6) */
#endif
#ifndef R_LATEREP
#define R_LATEREP 1  /* a Grant too late to call is answered with not_called (C4 / rule 2) */
#endif
#ifndef R_UNCOUNTED
#define R_UNCOUNTED 1 /* not_called does not count against max attempts */
#endif
#ifndef R_WITHDRAW
#define R_WITHDRAW 1 /* revocation: a claim not yet called is given up with not_called */
#endif
#ifndef R_SETTLE
#define R_SETTLE 1   /* effect reports never dropped: any success / found settles, FAILED ->
                        SUCCEEDED (late_effect), granted elsewhere -> duplicate_effect */
#endif
#ifndef R_UNKNOP
#define R_UNKNOP 1   /* attempts used up with an unknown outcome: NEEDS_OPERATOR, never FAILED */
#endif
#ifndef R_DUPREC
#define R_DUPREC 1   /* a success from another claim while the current attempt is RECONCILING
                        or NEEDS_OPERATOR also raises duplicate_effect (effects.effect_seen;
                        found by this model: the code did so only in DISPATCHED) */
#endif
#ifndef R_SKIP
#define R_SKIP 1     /* a connector skips a dispatch id it already handled */
#endif
#ifndef R_NCFORGET
#define R_NCFORGET 1 /* ... but not one whose claim it withdrew with not_called (core.py produced) */
#endif
#ifndef R_FASTWAIT
#define R_FASTWAIT 1 /* a fast-path job waits for its claim's answer after calling */
#endif
#ifndef FASTEARLY
#define FASTEARLY 1  /* core.py _await_answer: a fast-path job whose partition was revoked during
                        its call still acts on an answer it read before the revocation (a Held
                        sends it back to claim: the new claim is then withdrawn at once) */
#endif
#ifndef STARTBY
#define STARTBY 1    /* the worker's start_by check: a holder frozen before it reports not_called */
#endif
/* ---------------------------------------------------------------- the pre-granted first attempt
   (docs/pregrant design): the processor grants attempt 1 in the Dispatch itself, with a lease of
   its own (the pre-grant's, `lexp[0]`), to the connector that fences the dispatch record */
#ifndef PREGRANT
#define PREGRANT 0   /* 1: Policy.pregrant_lease_ms > 0 (the pre-grant on) */
#endif
#ifndef EOS
#define EOS PREGRANT /* 1: exactly-once processor: its outputs and state commit together, so a
                        crash aborts only the open transaction and the restart resumes at the
                        committed state and outputs; every decided step of the model is committed,
                        so a crash changes nothing (PCRASH ignored; no record is written twice).
                        0: at least once (a crash rolls back and re-emits identical outputs).
                        The runtime turns the pre-grant on only under exactly once. */
#endif
#ifndef ZOMBIE
#define ZOMBIE PREGRANT /* 1: a frozen member removed from the group wakes unaware of it and goes
                        on reading (records fetched before it learns) until its next poll; its
                        commits fail (the group generation moved on), its produces do not */
#endif
#ifndef IDLEFLT
#define IDLEFLT PREGRANT /* 1: freezes and rebalances also while the connector is idle */
#endif
#ifndef R_FENCE
#define R_FENCE 1    /* the fence: commit past the dispatch record, synchronously, only as the
                        partition's owner in the current generation, before the fenced claim */
#endif
#ifndef R_LIVE
#define R_LIVE 1     /* only a live record takes the pre-grant (a backlog one: the plain path) */
#endif
#ifndef R_FRONTIER
#define R_FRONTIER 1 /* fence only when the partition's commit frontier is at the record. The model
                        has one key, whose jobs run one at a time in offset order: when a dispatch
                        job starts every earlier record is finished, so the frontier is always at
                        it and removing the rule changes nothing (not expressible here) */
#endif
#ifndef R_PLAINHELD
#define R_PLAINHELD 1 /* a plain claim within the pre-grant gets Held until the pre-grant's end */
#endif
#ifndef R_STALLPLAIN
#define R_STALLPLAIN 1 /* every Dispatch but the intent's first one is plain (the stall copy too) */
#endif
/* ---------------------------------------------------------------- the operator's freeze of the key's
   action in hold mode (domain/containment.py): a decision that would dispatch, or the first grant
   of a dispatch that left before the freeze, holds the key instead (HELD, no Dispatch; the
   claimant gets Held and claims again later); the unfreeze releases it (RESERVED, a plain
   Dispatch), into another freeze's hold while one still covers the key */
#ifndef HOLDFRZ
#define HOLDFRZ 0    /* freezes the operator issues: 0, 1 or 2 scopes covering the key, each frozen
                        once and unfrozen once, at any point (scope 1 first: the two are alike) */
#endif
#ifndef HOLDOVL
#define HOLDOVL 0    /* 1: the second scope is frozen only while the first is in force (the
                        freezes overlap: a release may go into the other's hold) */
#endif
#ifndef R_HOLDPG
#define R_HOLDPG 1   /* a hold keeps a running pre-grant (containment.withhold; 0: dropped, the
                        defect fixed by 467d676) */
#endif
#ifndef R_REHOLDPG
#define R_REHOLDPG 1 /* ... from HELD too: an unfreeze releasing into another freeze's hold (0: kept
                        only from RESERVED, the defect fixed by fc47321) */
#endif
#ifndef FENCEDUE
#define FENCEDUE 0   /* 1: the pre-grant's lease does not end between a live connector's fence and
                        its fenced claim's record (a timing assumption: with a freeze the late
                        fenced claim leaves the key RESERVED for good, README "Findings") */
#endif
#ifndef R_HELDGRANT
#define R_HELDGRANT 1 /* a fenced claim within a kept pre-grant is granted on a HELD key
                        (decide._claim) */
#endif
/* ---------------------------------------------------------------- properties */
#ifndef CHK_P1
#define CHK_P1 1     /* at most one Grant per attempt */
#endif
#ifndef CHK_P1B
#define CHK_P1B 1    /* at most one target call per attempt made on a grant (fast calls excepted) */
#endif
#ifndef CHK_P3
#define CHK_P3 1     /* at most one effect per key ... */
#endif
#ifndef P3RELAX
#define P3RELAX 1    /* ... unless a commit came after its lease (the documented window) */
#endif
#ifndef CHK_P45
#define CHK_P45 1    /* P4 no effect with conflicting args, P5 no effect without accepted intent */
#endif
#ifndef CHK_P6
#define CHK_P6 1     /* progress at quiescence: SUCCEEDED, FAILED or NEEDS_OPERATOR */
#endif
#ifndef CHK_P6B
#define CHK_P6B 1    /* at quiescence the ledger agrees with the target: SUCCEEDED -> an effect
                        exists; FAILED -> no effect committed within its lease */
#endif
#ifndef CHK_P6C
#define CHK_P6C 1    /* at quiescence no connector is stuck in a job (every claim answered) */
#endif
#ifndef CHK_P7
#define CHK_P7 1     /* a Reconcile for a claim or a deadline needs an expired lease */
#endif
#ifndef CHK_P7B
#define CHK_P7B 1    /* P7': a healthy holder is never reconciled before it records its outcome */
#endif
#ifndef CHK_P8
#define CHK_P8 1     /* two effects and the late call's success reported -> duplicate_effect */
#endif
#ifndef CHK_P9
#define CHK_P9 1     /* no false duplicate_effect: raised only with 2 effects or a late one */
#endif
#ifndef CHK_BOUND
#define CHK_BOUND 0  /* coverage probe: fail when a run reaches a model bound */
#endif

/* ---------------------------------------------------------------- codes */
#define S_ABSENT 0
#define S_RES    1
#define S_DISP   2
#define S_REC    3
#define S_SUCC   4
#define S_FAIL   5
#define S_NOP    6   /* NEEDS_OPERATOR */
#define S_HELD   7   /* HELD by a freeze (HOLDFRZ) */
/* input log events */
#define E_INTENT 1
#define E_CLAIM  2
#define E_OUT    3
#define E_RRES   4
#define E_OPRES  5
#define E_TIMER  6
#define E_FRZ    7   /* Containment: the operator freezes scope n (hold mode) */
#define E_UNF    8   /* Containment: the operator unfreezes scope n */
/* dispatch partition records */
#define D_DISP   1
#define D_GRANT  2
#define D_HELD   3
#define D_RECON  4
#define D_DONE   5
#define D_AGAIN  6   /* Held for a held key (containment.claim_again): claim again later */
/* outcome kinds */
#define O_SUCC   1
#define O_RETRY  2   /* not_applied: failed, definitely not applied, retryable */
#define O_PERM   3   /* failed, permanent */
#define O_UNK    4   /* unknown */
#define O_NCALL  5   /* not_called: the claim is given up, the target was never called */
/* reconcile results */
#define R_FOUND    1
#define R_NOTFOUND 2
#define R_CANNOT   3
/* operator resolutions */
#define OP_APPLIED 1
#define OP_NOTAPP  2
#define OP_FAILED  3
/* claim ids: 1.. minted by connectors; 0 names the deadline timer (TIMER_CLAIM) */
#define TIMERID  0
#define OPID     250 /* settled_by for an operator's resolution */
/* connector program counter (core.py stages) */
#define C_IDLE    0
#define C_WAIT    2  /* ANSWER: claim recorded, waiting for the answer naming its claim id */
#define C_HELDW   3  /* WAITING: Held, claims again (new id) once the lease is over */
#define C_CHECKED 5  /* CALLING: lease checked, request not on the wire yet */
#define C_SENT    6  /* CALLING: request on the wire */
#define C_REPORT  7  /* REPORTING / WITHDRAWING: outcome about to be produced */
#define C_COMMIT  8  /* outcome recorded: finish the job (handled, commit the offset) */
#define C_FENCE   9  /* pre-grant path: about to fence (a failed fence is retried, never plain) */
#define C_FENCED 10  /* fenced: the fenced claim is about to be produced */
#define C_FACK   11  /* fenced claim acknowledged: the lease check (pre-grant's lease) next */

/* ---------------------------------------------------------------- global state */
byte Lt[LMAX]; byte Ln[LMAX]; byte Lc[LMAX]; byte Lk[LMAX]; byte Le[LMAX];
byte llen;
byte Dt[DMAX]; byte Dn[DMAX]; byte Dc[DMAX];
bit Dl[DMAX];          /* Dispatch: carries the pre-grant (lease_until_ms > 0); Grant / Held: its
                          lease is the pre-grant's */
byte dlen;

/* processor: KeyState reduced to what decisions read */
byte st, pn, ph, pa;   /* phase, attempt, granted claim id (0: none), args */
byte plap;             /* lapses (not_called attempts) */
byte punk;             /* unknown_attempts */
byte pext, psb;        /* external id and settled_by of a SUCCEEDED key */
byte pstall;           /* stall_alerted */
byte poff;
bit ppg;               /* RESERVED attempt 1 with a pre-grant (pregrant_until_ms > 0) */
bit pfh;               /* the current attempt was granted to a fenced claim within the pre-grant:
                          its lease is the pre-grant's (lexp[0]) */
bit rpl;               /* re-deciding the prefix after a crash: outputs exist already */
#if HOLDFRZ
byte pfz;              /* the freezes in force (bit s-1: scope s), as decided so far */
byte phb;              /* held_by: the scope that holds the key (HELD), 0: none */
byte ofz, ounf;        /* the operator: freezes issued (scopes 1..ofz), unfreezes issued (bits) */
#endif
byte pcrash = PCRASH;

/* connectors */
byte cpc[NC], cn[NC], cid[NC], cidx[NC], cpos[NC], cnext[NC], cres[NC], cext[NC];
byte cresp[NC], crext[NC], creq[NC], cmark[NC], chand[NC], cinc[NC];
bit cfz[NC], czomb[NC], cpass[NC], cfast[NC], ccalled[NC], cab[NC], clost[NC], cearly[NC];
bit cfen[NC];          /* the job is on the pre-grant path (its claim is fenced) */
bit cwl[NC];           /* the Held it waits on names the pre-grant's lease */
#if HOLDFRZ
bit cwh[NC];           /* the Held it waits on is a held key's (claim again later) */
#endif
byte owner, dcom, ncid;
byte ccrash = CCRASH, frz = FRZ, reb = REB;

/* network + target */
bit ract[NREQ], rw[NREQ], rf[NREQ];   /* rf: a call under the pre-grant's lease */
bit rfa[NREQ];         /* a fast-path call (made before any grant) */
byte rn[NREQ], ra[NREQ], rc[NREQ];
byte teff, tlatem;     /* effects committed (ext ids 1..teff); bit e: effect e came after its lease */
byte tfail = TFAIL, netf = NETF;
short slow = SLOW;
byte tmr = TMR;

/* leases, operator (index 0: the pre-grant's lease, from the pre-granted Dispatch) */
bit lst[NMAX+1], lexp[NMAX+1];
bit opdone[NMAX+1];

/* ghosts for the properties */
bit gacc; byte gargs;
byte ggrant[NMAX+1];
byte gsent[NMAX+1];
byte ghh[NMAX+1];
byte gmaxn;            /* the highest attempt dispatched */
bit gfl;               /* attempt 1 was granted to a fenced claim: its lease is the pre-grant's */
bit galdup;            /* a duplicate_effect alert was raised */
byte grep;             /* bit e: a success with external id e is in the log */
bit ovf;               /* a model bound was reached: run truncated */

/* scratch (0 between steps) */
byte x_i, x_j, x_k, x_r, y_s, y_n, y_h, y_d, y_e, y_b, y_u, y_l, y_x;
bit y_a;

/* ---------------------------------------------------------------- helpers */
inline lappend(t, n, c, k, e) {
  if
  :: llen < LMAX -> Lt[llen] = t; Ln[llen] = n; Lc[llen] = c; Lk[llen] = k; Le[llen] = e; llen++
  :: else -> ovf = 1
  fi
}

inline emit(t, n, c, l) {
  if
  :: rpl -> skip
  :: !rpl && dlen < DMAX -> Dt[dlen] = t; Dn[dlen] = n; Dc[dlen] = c; Dl[dlen] = l; dlen++
  :: !rpl && dlen >= DMAX -> ovf = 1
  fi
}

#define AS(e) if :: !rpl -> assert(e) :: else -> skip fi

/* ---------------------------------------------------------------- printing */
inline pst(v) {
  if
  :: v == S_ABSENT -> printf("ABSENT")
  :: v == S_RES -> printf("RESERVED")
  :: v == S_DISP -> printf("DISPATCHED")
  :: v == S_REC -> printf("RECONCILING")
  :: v == S_SUCC -> printf("SUCCEEDED")
  :: v == S_FAIL -> printf("FAILED")
  :: v == S_NOP -> printf("NEEDS_OPERATOR")
#if HOLDFRZ
  :: v == S_HELD -> printf("HELD")
#endif
  fi
}
inline pkind(k) {
  if
  :: k == O_SUCC -> printf("succeeded")
  :: k == O_RETRY -> printf("failed-not-applied")
  :: k == O_PERM -> printf("failed-permanent")
  :: k == O_UNK -> printf("unknown")
  :: k == O_NCALL -> printf("not-called")
  fi
}
inline pev(i) {
  if
  :: Lt[i] == E_INTENT -> printf("Intent(args=%d)", Ln[i])
  :: Lt[i] == E_CLAIM && !(Lk[i] & 4) -> printf("Claim(n=%d, id=%d)", Ln[i], Lc[i])
  :: Lt[i] == E_CLAIM && (Lk[i] & 4) -> printf("Claim(n=%d, id=%d, fenced)", Ln[i], Lc[i])
  :: Lt[i] == E_OUT -> printf("Outcome(n=%d, id=%d, ", Ln[i], Lc[i]); pkind(Lk[i]); printf(")")
  :: Lt[i] == E_RRES ->
     printf("ReconcileResult(n=%d, ", Ln[i]);
     if
     :: Lk[i] == R_FOUND -> printf("found)")
     :: Lk[i] == R_NOTFOUND -> printf("not found)")
     :: Lk[i] == R_CANNOT -> printf("cannot query)")
     fi
  :: Lt[i] == E_OPRES ->
     printf("OperatorResolution(n=%d, ", Ln[i]);
     if
     :: Lk[i] == OP_APPLIED -> printf("applied)")
     :: Lk[i] == OP_NOTAPP -> printf("not applied)")
     :: Lk[i] == OP_FAILED -> printf("failed)")
     fi
  :: Lt[i] == E_TIMER -> printf("Timer(n=%d)", Ln[i])
#if HOLDFRZ
  :: Lt[i] == E_FRZ -> printf("Freeze(scope=%d, hold)", Ln[i])
  :: Lt[i] == E_UNF -> printf("Unfreeze(scope=%d)", Ln[i])
#endif
  fi
}
inline pdq(i) {
  if
  :: Dt[i] == D_DISP && !Dl[i] -> printf("Dispatch(%d)", Dn[i])
  :: Dt[i] == D_DISP && Dl[i] -> printf("Dispatch(%d, pre-granted)", Dn[i])
  :: Dt[i] == D_GRANT -> printf("Grant(n=%d, id=%d)", Dn[i], Dc[i])
  :: Dt[i] == D_HELD -> printf("Held(n=%d, id=%d)", Dn[i], Dc[i])
  :: Dt[i] == D_RECON -> printf("Reconcile(%d)", Dn[i])
  :: Dt[i] == D_DONE -> printf("Done(n=%d, id=%d)", Dn[i], Dc[i])
#if HOLDFRZ
  :: Dt[i] == D_AGAIN -> printf("Held(n=%d, id=%d)", Dn[i], Dc[i])
#endif
  fi
}

/* ---------------------------------------------------------------- the decision table */
/* the lease of the current attempt's grant: the pre-grant's (index 0) or the attempt's own */
#define PLX (pfh -> 0 : pn)
#if HOLDFRZ
/* containment.withhold: the key is HELD by the first freeze in force (scope 1 when both are, as
   it was frozen first), its Dispatch withheld; keep: a running pre-grant is kept (HELD with
   pregrant_until_ms), otherwise dropped (transitions.enter) */
#define HOLDER ((pfz & 1) -> 1 : 2)
inline hold_key(keep) {
  st = S_HELD; phb = HOLDER;
  if :: !(keep) -> ppg = 0 :: else -> skip fi
}
#endif
/* transitions.py next_attempt: attempt n+1, or stop when the counted attempts are used up
   (FAILED if every attempt definitely did not apply, NEEDS_OPERATOR otherwise) */
inline next_attempt(counted) {
  if
  :: counted && pn - plap >= MAXATT && (punk > 0 && R_UNKNOP) ->
     /* already with an operator: a new question at attempt n+1, no dispatch, a lapse
        (transitions.py next_attempt), so a decision about attempt n cannot answer it */
     if
     :: st == S_NOP && pn < NMAX -> pn++; plap++
     :: st == S_NOP && pn >= NMAX -> ovf = 1
     :: else -> skip
     fi;
     st = S_NOP
  :: counted && pn - plap >= MAXATT && !(punk > 0 && R_UNKNOP) -> st = S_FAIL
  :: !(counted && pn - plap >= MAXATT) && pn < NMAX && (counted || plap < LAPMAX) ->
     if :: !counted -> plap++ :: else -> skip fi;
     pn++; st = S_RES; ph = 0; ppg = 0; pfh = 0;
#if HOLDFRZ
     if :: pfz -> hold_key(0) :: else -> emit(D_DISP, pn, pa, 0) fi;   /* withheld under a freeze */
#else
     emit(D_DISP, pn, pa, 0);
#endif
     if :: pn > gmaxn -> gmaxn = pn :: else -> skip fi
  :: else -> ovf = 1           /* model bound: more attempts or lapses than LAPMAX allows */
  fi
}

/* transitions.py reconcile: the outcome of the current attempt is unknown */
inline reconcile(cl) {
  st = S_REC; punk++; emit(D_RECON, pn, cl, 0)
}

/* effects.py effect_seen: a report that the target holds the key's effect. Never dropped. */
inline effect_seen(ext, cl, n, bylk) {
  if
  :: st == S_SUCC ->
     if
     :: ext != 0 && ext == pext && (bylk || DEDUP || (n == pn && cl == ph) || cl == psb) -> skip
     :: else -> galdup = 1; y_a = 1           /* duplicate_effect */
     fi
  :: else ->
     if
     :: (st == S_DISP || (R_DUPREC && (st == S_REC || st == S_NOP))) && !(n == pn && cl == ph) && !bylk && !DEDUP -> galdup = 1; y_a = 1
     :: else -> skip
     fi;
     if :: st == S_FAIL -> y_l = 1 :: else -> skip fi;   /* late_effect */
     st = S_SUCC; pext = ext; psb = cl
  fi
}

inline decide() {
  x_i = poff;
  if
  /* ---- Intent: first accepted; same or conflicting later ones change nothing */
  :: Lt[x_i] == E_INTENT ->
     if
     :: st == S_ABSENT ->
        st = S_RES; pa = Ln[x_i]; pn = 1; ph = 0; ppg = PREGRANT; pfh = 0;
#if HOLDFRZ
        if
        :: pfz -> hold_key(0)          /* reserved under a freeze: withheld, so no pre-grant */
        :: else ->
#endif
        emit(D_DISP, 1, pa, PREGRANT);                /* pre-granted: the pre-grant's lease starts */
        if :: PREGRANT -> lst[0] = 1 :: else -> skip fi;
#if HOLDFRZ
        fi;
#endif
        if :: gmaxn == 0 -> gmaxn = 1 :: else -> skip fi;
        if :: !gacc -> gacc = 1; gargs = Ln[x_i] :: else -> skip fi
     :: else -> skip
     fi
  /* ---- AttemptClaim(n, claim id, late = claim time >= lease_until)  (decide.py _claim) */
  :: Lt[x_i] == E_CLAIM ->
     if
#if HOLDFRZ
     /* HELD (decide._claim): the fencer of a pre-grant that left before the freeze is granted
        under it (it calls without waiting: a grant before a freeze is not recalled); any other
        claim is Held, to claim again later */
     :: st == S_HELD && Ln[x_i] == pn ->
        if
        :: R_HELDGRANT && ppg && !(Lk[x_i] & 2) && (Lk[x_i] & 4) ->
           st = S_DISP; ph = Lc[x_i]; pfh = 1; ppg = 0; phb = 0; gfl = 1;
#if CHK_P1
           AS(ggrant[pn] == 0 || ggrant[pn] == ph);
#endif
           ggrant[pn] = ph;
           emit(D_GRANT, pn, ph, 1)
        :: else -> emit(D_AGAIN, pn, Lc[x_i], 0)
        fi
     :: !((st == S_RES || st == S_DISP || st == S_HELD) && Ln[x_i] == pn) ->
        if :: R_DONE -> emit(D_DONE, Ln[x_i], Lc[x_i], 0) :: else -> skip fi
#else
     :: !((st == S_RES || st == S_DISP) && Ln[x_i] == pn) ->
        if :: R_DONE -> emit(D_DONE, Ln[x_i], Lc[x_i], 0) :: else -> skip fi
#endif
     :: (st == S_RES || st == S_DISP) && Ln[x_i] == pn ->
        /* a claim's flags: 1 = made after the lease of attempt n, 2 = after the pre-grant's
           lease, 4 = fenced. Within the pre-grant (ppg, flag 2 clear): a fenced claim becomes the
           holder under the pre-grant's lease; a plain one gets Held until its end */
        if
        :: st == S_RES && ppg && !(Lk[x_i] & 2) && (Lk[x_i] & 4) ->
           st = S_DISP; ph = Lc[x_i]; pfh = 1; ppg = 0; gfl = 1;
#if CHK_P1
           AS(ggrant[pn] == 0 || ggrant[pn] == ph);
#endif
           ggrant[pn] = ph;
           emit(D_GRANT, pn, ph, 1)
        :: st == S_RES && ppg && !(Lk[x_i] & 2) && !(Lk[x_i] & 4) && R_PLAINHELD ->
           emit(D_HELD, pn, Lc[x_i], 1)
        :: st == S_RES && !(ppg && !(Lk[x_i] & 2) && ((Lk[x_i] & 4) || R_PLAINHELD)) ->
#if HOLDFRZ
           if
           :: pfz -> emit(D_AGAIN, pn, Lc[x_i], 0); hold_key(0)  /* withhold: a first grant
                     (no pre-grant running) under a freeze: Held, the key HELD */
           :: else ->
#endif
           st = S_DISP; ph = Lc[x_i]; pfh = 0; ppg = 0;
#if CHK_P1
           AS(ggrant[pn] == 0 || ggrant[pn] == ph);
#endif
           ggrant[pn] = ph;
           emit(D_GRANT, pn, ph, 0)
#if HOLDFRZ
           fi
#endif
        :: st == S_DISP && Lc[x_i] == ph -> emit(D_GRANT, pn, ph, pfh)   /* the same Grant again */
        :: st == S_DISP && Lc[x_i] != ph && !(Lk[x_i] & (pfh -> 2 : 1)) ->
           if :: R_CLAIMID -> emit(D_HELD, pn, Lc[x_i], pfh) :: else -> emit(D_HELD, pn, ph, pfh) fi
        :: st == S_DISP && Lc[x_i] != ph && (Lk[x_i] & (pfh -> 2 : 1)) ->  /* holder presumed dead */
#if CHK_P7
           AS(lexp[PLX]);
#endif
#if CHK_P7B
           AS(ghh[pn] == 0);
#endif
           reconcile(Lc[x_i])
        fi
     fi
  /* ---- AttemptOutcome(n, claim id, kind, ext)  (decide.py _outcome, _holder_report) */
  :: Lt[x_i] == E_OUT ->
     if
     :: st == S_ABSENT -> skip                                   /* effect_without_intent */
     :: st != S_ABSENT && Lk[x_i] == O_SUCC && R_SETTLE -> effect_seen(Le[x_i], Lc[x_i], Ln[x_i], 0)
     :: st != S_ABSENT && Lk[x_i] == O_SUCC && !R_SETTLE ->   /* ablation: success counts only
                                                                  as the holder's report */
        if
        :: (st == S_DISP || st == S_REC || st == S_NOP) &&
           (!R_ATTEMPT || (Ln[x_i] == pn && Lc[x_i] == ph)) -> st = S_SUCC; pext = Le[x_i]; psb = Lc[x_i]
        :: st == S_SUCC && Le[x_i] != pext -> galdup = 1; y_a = 1
        :: else -> skip
        fi
     :: st != S_ABSENT && Lk[x_i] != O_SUCC &&
        (st == S_DISP || (R_LATEOUT && (st == S_REC || st == S_NOP))) &&
        (!R_ATTEMPT || (Ln[x_i] == pn && Lc[x_i] == ph)) ->      /* the holder's report */
        if
        :: Lk[x_i] == O_UNK ->
           if :: st == S_DISP -> reconcile(Lc[x_i]) :: else -> skip fi
        :: else ->
           if :: st != S_DISP && punk > 0 -> punk-- :: else -> skip fi;
           if
           :: Lk[x_i] == O_PERM -> st = S_FAIL
           :: Lk[x_i] == O_RETRY -> next_attempt(1)
           :: Lk[x_i] == O_NCALL -> next_attempt(!R_UNCOUNTED)
           fi
        fi
#if HOLDFRZ
     /* an unknown outcome from a claim without a grant for the open attempt (a fast call, or a
        fencer Held on a HELD key): reconcile before anything is resent (decide._outcome); a
        running pre-grant stays its lease (transitions.enter; a dropped one: no lease, the
        nearest the model has is the pre-grant's, index 0) */
     :: st != S_ABSENT && Lk[x_i] == O_UNK && (st == S_RES || st == S_HELD) && Ln[x_i] == pn ->
        pfh = (ppg || (pn == 1 && lst[0])); ppg = 0; reconcile(Lc[x_i])
#endif
     :: else -> skip                              /* stale, or not from the holder: recorded */
     fi
  /* ---- ReconcileResult(n, kind)  (decide.py _reconcile_result) */
  :: Lt[x_i] == E_RRES ->
     if
     :: Lk[x_i] == R_FOUND && st != S_ABSENT && R_SETTLE -> effect_seen(Le[x_i], Lc[x_i], Ln[x_i], 1)
     :: Lk[x_i] == R_FOUND && st == S_REC && !R_SETTLE && (!R_ATTEMPT || Ln[x_i] == pn) ->
        st = S_SUCC; pext = Le[x_i]; psb = Lc[x_i]
     :: Lk[x_i] != R_FOUND && st == S_REC && (!R_ATTEMPT || Ln[x_i] == pn) ->
        if
        :: Lk[x_i] == R_NOTFOUND && DEDUP -> next_attempt(1)
        :: else -> st = S_NOP
        fi
     :: else -> skip
     fi
  /* ---- OperatorResolution(n, kind)  (decide.py _operator) */
  :: Lt[x_i] == E_OPRES ->
     if
     :: st == S_NOP && (!R_ATTEMPT || Ln[x_i] == pn) ->
        if
        :: Lk[x_i] == OP_APPLIED -> st = S_SUCC; pext = Le[x_i]; psb = OPID
        :: Lk[x_i] == OP_FAILED -> st = S_FAIL
        :: Lk[x_i] == OP_NOTAPP -> if :: punk > 0 -> punk-- :: else -> skip fi; next_attempt(1)
        fi
     :: else -> skip
     fi
  /* ---- Timer(n, lease of n expired)  (deadlines.py deadline) */
  :: Lt[x_i] == E_TIMER ->
     if
     :: Ln[x_i] == pn && st == S_DISP && Lk[x_i] ->
#if CHK_P7
        AS(lexp[PLX]);
#endif
#if CHK_P7B
        AS(ghh[pn] == 0);
#endif
        reconcile(TIMERID)
     :: Ln[x_i] == pn && st == S_REC && Lk[x_i] -> st = S_NOP
     :: Ln[x_i] == pn && st == S_RES && STALL && pstall != pn -> pstall = pn;
#if HOLDFRZ
        if
        :: pfz -> hold_key(R_HOLDPG)     /* the copy withheld: HELD, a running pre-grant kept */
        :: else ->
#endif
        emit(D_DISP, pn, pa, (R_STALLPLAIN -> 0 : ppg))   /* the stall copy: plain */
#if HOLDFRZ
        fi
#endif
     :: else -> skip
     fi
#if HOLDFRZ
  /* ---- Containment (containment.py apply): a freeze in hold mode of scope n; an unfreeze, which
     releases the key its freeze holds (release: RESERVED, stall alert cleared, a plain
     Dispatch), withheld again while another freeze covers it */
  :: Lt[x_i] == E_FRZ -> pfz = pfz | (1 << (Ln[x_i] - 1))
  :: Lt[x_i] == E_UNF ->
     pfz = pfz & (3 - (1 << (Ln[x_i] - 1)));
     if
     :: st == S_HELD && phb == Ln[x_i] ->
        st = S_RES; phb = 0; pstall = 0;
        if
        :: pfz -> hold_key(R_HOLDPG && R_REHOLDPG)   /* into another freeze's hold */
        :: else -> emit(D_DISP, pn, pa, 0)
        fi
     :: else -> skip
     fi
#endif
  fi;
#if HOLDFRZ
  if :: st != S_HELD -> phb = 0 :: else -> skip fi;
#endif
  x_i = 0
}

/* one processed event as a trace line (claims in the reference's short form) */
inline pline(i) {
  if
  :: Lt[i] == E_TIMER -> printf("(PROCESSOR  log[%d] ", i)
  :: else -> printf("PROCESSOR  log[%d] ", i)
  fi;
  pev(i); printf(": ");
  if
  :: Lt[i] == E_CLAIM || Lt[i] == E_INTENT -> pst(y_s); printf(" -> "); pst(st)
  :: else -> pst(y_s); printf("(n=%d) -> ", y_n); pst(st); printf("(n=%d)", pn)
  fi;
  x_j = y_d;
  do
  :: x_j < dlen -> printf(", "); pdq(x_j); printf(" -> dq[%d]", x_j); x_j++
  :: else -> break
  od;
  if :: y_a -> printf(", Alert(duplicate_effect)") :: else -> skip fi;
  if :: y_l -> printf(", Alert(late_effect)") :: else -> skip fi;
  if :: y_s != S_NOP && st == S_NOP -> printf(", Alert(reconciliation_required)") :: else -> skip fi;
  if :: Lt[i] == E_TIMER -> printf(")") :: else -> skip fi;
  printf("\n");
  x_j = 0
}

/* ---------------------------------------------------------------- processor */
proctype Processor() {
end_p:
  do
  /* decide the next event; one that changes nothing (state, outputs, alerts) is decided in
     the same step as the next one */
  :: d_step { !ovf && poff < llen ->
       do
       :: poff < llen ->
          y_s = st; y_n = pn; y_h = ph; y_d = dlen; y_e = pext; y_b = psb; y_u = punk;
          y_x = plap; y_a = 0; y_l = 0;
          decide();
          pline(poff);
          poff++;
          if
          :: !ovf && st == y_s && pn == y_n && ph == y_h && dlen == y_d && pext == y_e &&
             psb == y_b && punk == y_u && plap == y_x && !y_a && !y_l -> skip
          :: else -> break
          fi
       :: else -> break
       od;
       y_s = 0; y_n = 0; y_h = 0; y_d = 0; y_e = 0; y_b = 0; y_u = 0; y_x = 0; y_a = 0; y_l = 0 }
  /* crash: restart from the last committed offset, which may be any earlier one */
  :: atomic { !ovf && !EOS && pcrash > 0 && poff > 0 ->
       pcrash--;
       x_k = 0;
       do
       :: x_k + 1 < poff -> x_k++
       :: break
       od;
       printf("PROCESSOR  CRASH + restart: state rolled back to offset %d, reprocessing log[%d..%d]\n", x_k, x_k, poff-1);
       rpl = 1; st = S_ABSENT; pn = 0; ph = 0; pa = 0; plap = 0; punk = 0; pext = 0; psb = 0;
       pstall = 0; poff = 0; ppg = 0; pfh = 0;
#if HOLDFRZ
       pfz = 0; phb = 0;
#endif
       do
       :: poff < x_k -> y_a = 0; y_l = 0; decide(); poff++
       :: else -> break
       od;
       rpl = 0; x_k = 0; y_a = 0; y_l = 0 }
  od
}

/* ---------------------------------------------------------------- agents */
proctype Agent(byte args) {
  atomic { !ovf -> lappend(E_INTENT, args, 0, 0, 0);
    printf("AGENT      Intent(args=%d) -> log[%d]\n", args, llen-1) }
}

/* ---------------------------------------------------------------- connectors */
#define RUN(c) (!ovf && !cfz[c])
#define LX(c) (cfen[c] -> 0 : cn[c])   /* the lease connector c's job calls under */
#define RL(r) (rf[r] -> 0 : rn[r])     /* the lease request r was sent under */
/* reads as a member: the owner, or a removed member that has not learnt it yet (ZOMBIE) */
#define MEMBER(c) (owner == c || clost[c])

/* does dispatch record i answer connector c's current claim? */
#if R_CLAIMID
#define ANSWER(i,c) (Dn[i] == cn[c] && Dc[i] == cid[c] && Dt[i] != D_DISP)
#else
#define ANSWER(i,c) (Dn[i] == cn[c] && \
                     ((Dt[i] == D_GRANT && Dc[i] == cid[c]) || (Dt[i] == D_HELD && Dc[i] != cid[c]) || \
                      Dt[i] == D_RECON || (Dt[i] == D_DONE && Dc[i] == cid[c])))
#endif
#define WORK(i) (Dt[i] == D_DISP || Dt[i] == D_RECON)
/* a work item read earlier and not started yet lies before record k */
#define QB(i,c,k) (i < DMAX && i >= cnext[c] && i < k && WORK(i))
#define QB4(b,c,k) (QB(b,c,k) || QB(b+1,c,k) || QB(b+2,c,k) || QB(b+3,c,k))
#define QUEUED(c,k) (QB4(0,c,k) || QB4(4,c,k) || QB4(8,c,k) || QB4(12,c,k) || QB4(16,c,k) || QB4(20,c,k))

/* exact guards, so that a connector with nothing to read is blocked and quiescence is real:
   an unread answer to my claim (at or after cpos), a work item not started (at or after cnext) */
#define ANS_AT(i,c)  (i < DMAX && i >= cpos[c] && i < dlen && ANSWER(i,c))
#define WORK_AT(i,c) (i < DMAX && i >= cnext[c] && i < dlen && WORK(i))
#define ANS4(b,c)  (ANS_AT(b,c) || ANS_AT(b+1,c) || ANS_AT(b+2,c) || ANS_AT(b+3,c))
#define WORK4(b,c) (WORK_AT(b,c) || WORK_AT(b+1,c) || WORK_AT(b+2,c) || WORK_AT(b+3,c))
#define HASANS(c)  (ANS4(0,c) || ANS4(4,c) || ANS4(8,c) || ANS4(12,c) || ANS4(16,c) || ANS4(20,c))
#define HASWORK(c) (WORK4(0,c) || WORK4(4,c) || WORK4(8,c) || WORK4(12,c) || WORK4(16,c) || WORK4(20,c))

inline clear_holder(c) {           /* ghost: connector c is no longer a healthy holder */
  x_k = 1;
  do
  :: x_k <= NMAX -> if :: ghh[x_k] == c+1 -> ghh[x_k] = 0 :: else -> skip fi; x_k++
  :: else -> break
  od;
  x_k = 0
}

inline reset_job(c) {
  cpc[c] = C_IDLE; cidx[c] = 0; cn[c] = 0; cres[c] = 0; cext[c] = 0; cpass[c] = 0;
  cfen[c] = 0; cwl[c] = 0;
#if HOLDFRZ
  cwh[c] = 0;
#endif
  cfast[c] = 0; ccalled[c] = 0; cab[c] = 0; czomb[c] = 0; cearly[c] = 0;
  if :: R_CLAIMID -> cid[c] = 0 :: else -> skip fi
}

/* the group assigns the partition to o: it reads from the committed offset; what is in the
   partition now is backlog (never on the fast path) */
inline assign(o) {
  owner = o; cpos[o] = dcom; cnext[o] = dcom; cmark[o] = dlen
}

/* core.py _abandon (revocation or shutdown): a job between claims is dropped; a claim waiting
   for its answer is given up with not_called (once called on the fast path: just finished);
   a call, lookup or report on the wire finishes. Abandoned jobs are never "handled" and never
   commit. */
inline abandon(c) {
  if
  :: cpc[c] == C_IDLE -> skip
  :: cpc[c] == C_FENCE || cpc[c] == C_FENCED ->   /* nothing claimed: dropped, not handled */
     printf("(CONNECTOR%d drops dq[%d] before its fenced claim: partition revoked)\n", c, cidx[c]);
     reset_job(c)
  :: cpc[c] == C_FACK && R_WITHDRAW ->            /* fenced claim recorded, not called */
     printf("(CONNECTOR%d withdraws fenced claim id=%d: partition revoked)\n", c, cid[c]);
     cab[c] = 1; cres[c] = O_NCALL; cext[c] = 0; cpc[c] = C_REPORT
  :: cpc[c] == C_FACK && !R_WITHDRAW -> reset_job(c)
  :: cpc[c] == C_HELDW ->
     printf("(CONNECTOR%d gives up dq[%d] between claims: partition revoked)\n", c, cidx[c]);
     reset_job(c)
  :: cpc[c] == C_WAIT && ccalled[c] ->
     printf("(CONNECTOR%d drops dq[%d], its fast call reported: partition revoked)\n", c, cidx[c]);
     reset_job(c)
  :: cpc[c] == C_WAIT && !ccalled[c] && R_WITHDRAW ->
     printf("(CONNECTOR%d withdraws claim id=%d: partition revoked)\n", c, cid[c]);
     cab[c] = 1; cres[c] = O_NCALL; cext[c] = 0; cpc[c] = C_REPORT
  :: cpc[c] == C_WAIT && !ccalled[c] && !R_WITHDRAW ->
     printf("(CONNECTOR%d drops claim id=%d in silence: partition revoked)\n", c, cid[c]);
     reset_job(c)
  :: else -> cab[c] = 1;
     if     /* a fast call in progress may have read its answer already */
     :: FASTEARLY && cfast[c] && cpc[c] != C_COMMIT && HASANS(c) -> cearly[c] = 1
     :: true -> skip
     fi
  fi
}

inline revoke(c) {
  if
  :: cfz[c] -> clost[c] = 1          /* a frozen instance learns when it wakes */
  :: else -> abandon(c)
  fi
}

/* step 1: produce AttemptClaim(n, claim id); the lease of attempt n starts with its first claim */
inline claim(c) {
#if R_CLAIMID
  if
  :: ncid < CIDMAX -> ncid++; cid[c] = ncid
  :: else -> ovf = 1
  fi;
#else
  cid[c] = 1 + c + (PERINC -> 2 * cinc[c] : 0);
#endif
  lappend(E_CLAIM, cn[c], cid[c], lexp[cn[c]] + 2 * lexp[0] + 4 * cfen[c], 0);
  printf("CONNECTOR%d ", c); pev(llen-1); printf(" -> log[%d]\n", llen-1);
  if
  :: lexp[cn[c]] -> printf("(claim made after lease %d expired)\n", cn[c])
  :: else -> skip
  fi;
  /* the lease of attempt n starts with its first claim that can hold a lease of its own: not a
     claim within the pre-grant (fenced: it holds the pre-grant's; plain: it is Held) */
  if
  :: PREGRANT && cn[c] == 1 && lst[0] && !lexp[0] && (cfen[c] || R_PLAINHELD) -> skip
  :: else -> lst[cn[c]] = 1
  fi;
  if
  :: cab[c] -> cres[c] = O_NCALL; cext[c] = 0; cpc[c] = C_REPORT   /* abandoned: withdrawn */
  :: !cab[c] && cfen[c] -> cpc[c] = C_FACK      /* fenced: acknowledged, the lease check next */
  :: !cab[c] && cfast[c] -> cpc[c] = C_CHECKED  /* fast path: call at once, no grant, no lease */
  :: !cab[c] && !cfast[c] -> cpc[c] = C_WAIT
  fi
}

/* the Grant's lease check (core.py _answer): the rest of the lease must cover the call, the
   report and the skew; otherwise the claim is given up with not_called */
inline check(c) {
  if
  :: !lexp[LX(c)] -> cpass[c] = 1; cpc[c] = C_CHECKED;
     if :: CHK_P7B -> ghh[cn[c]] = c + 1 :: else -> skip fi;
     printf("CONNECTOR%d lease %d still valid: will call\n", c, cn[c])
  :: else ->
     printf("CONNECTOR%d lease %d already expired: does not call\n", c, cn[c]);
     if
     :: R_LATEREP -> cres[c] = O_NCALL; cext[c] = 0; cpc[c] = C_REPORT
     :: else -> cpc[c] = C_COMMIT
     fi
  fi
}

/* finish the job: mark a dispatch handled and commit, unless it was abandoned (core.py _finish) */
inline finish(c, quiet) {
  if
  :: !cab[c] && owner == c ->
     if :: Dt[cidx[c]] == D_DISP && !(R_NCFORGET && cres[c] == O_NCALL) ->
           chand[c] = chand[c] | (1 << cn[c])
        :: else -> skip fi;
     dcom = cidx[c] + 1;
     if
     :: quiet -> printf("(CONNECTOR%d commits dispatch offset %d)\n", c, dcom)
     :: else -> printf("CONNECTOR%d commits dispatch offset %d\n", c, dcom)
     fi
  :: else -> printf("(CONNECTOR%d done with dq[%d]: abandoned, no commit)\n", c, cidx[c])
  fi;
  reset_job(c)
}

/* print the records read on the way to record k (the replay reads one record per line) */
inline read_upto(c, k) {
  do
  :: cpos[c] < k ->
     if
     :: WORK(cpos[c]) -> printf("CONNECTOR%d reads dq[%d] (", c, cpos[c]); pdq(cpos[c]); printf(", queued)\n")
     :: else -> printf("CONNECTOR%d reads dq[%d] ", c, cpos[c]); pdq(cpos[c]); printf(" (not for it)\n")
     fi;
     cpos[c]++
  :: else -> break
  od
}

/* a Reconcile job: look the key up (never resend) and produce the result, in one step (a crash
   or revocation in between equals one before it: nothing was recorded, nothing was sent) */
inline reconcile_job(c, i, queued) {
  cidx[c] = i; cn[c] = Dn[i]; cnext[c] = i + 1; cab[c] = 0;
#if DEDUP
  if
  :: teff > 0 -> cres[c] = R_FOUND; cext[c] = 1
  :: else -> cres[c] = R_NOTFOUND
  fi;
#else
  cres[c] = R_CANNOT;
#endif
  lappend(E_RRES, cn[c], Dc[i], cres[c], cext[c]);
  if
  :: queued -> printf("(CONNECTOR%d starts dq[%d] Reconcile(%d), read earlier, queries the target: ", c, i, cn[c]);
     pev(llen-1); printf(" -> log[%d])\n", llen-1)
  :: else -> printf("CONNECTOR%d reads dq[%d] Reconcile(%d), queries the target: ", c, i, cn[c]);
     pev(llen-1); printf(" -> log[%d]\n", llen-1)
  fi;
  cres[c] = 0; cext[c] = 0;
  cpc[c] = C_COMMIT
}

proctype Connector(byte c) {
end_c:
  do
  /* start the next work item (queued, or read now): Dispatch -> claim; a dispatch id this
     instance handled -> skip; Reconcile -> look the key up, produce the result */
  :: d_step { RUN(c) && cpc[c] == C_IDLE && MEMBER(c) && HASWORK(c) ->
       x_i = cnext[c];
       do
       :: x_i < dlen && !WORK(x_i) -> x_i++
       :: else -> break
       od;
       y_b = (x_i < cpos[c]);              /* read earlier, while busy: queued */
       if :: !y_b -> read_upto(c, x_i); cpos[c] = x_i + 1 :: else -> skip fi;
       cnext[c] = x_i + 1; cidx[c] = x_i; cn[c] = Dn[x_i]; cab[c] = 0;
       if
       :: Dt[x_i] == D_DISP ->
          if
          :: y_b -> printf("(CONNECTOR%d starts dq[%d] Dispatch(%d), read earlier)\n", c, x_i, cn[c])
          :: else -> printf("CONNECTOR%d reads dq[%d] Dispatch(%d)\n", c, x_i, cn[c])
          fi;
          if
          :: R_SKIP && (chand[c] & (1 << cn[c])) ->
             printf("(CONNECTOR%d has handled dispatch %d already: skips it)\n", c, cn[c]);
             finish(c, 0)
          /* a live pre-granted dispatch whose lease covers the call: the pre-grant path */
          :: !(R_SKIP && (chand[c] & (1 << cn[c]))) && PREGRANT && Dl[x_i] &&
             (x_i >= cmark[c] || !R_LIVE) && !lexp[0] ->
             printf("CONNECTOR%d takes the pre-grant of dq[%d] (backlog: %d)\n", c, x_i, x_i < cmark[c]);
             cfen[c] = 1; cpc[c] = C_FENCE
          :: !(R_SKIP && (chand[c] & (1 << cn[c]))) &&
             !(PREGRANT && Dl[x_i] && (x_i >= cmark[c] || !R_LIVE) && !lexp[0]) ->
             cfast[c] = (FAST && x_i >= cmark[c]);
             claim(c)
          fi
       :: else -> reconcile_job(c, x_i, y_b)
       fi;
       x_i = 0; y_b = 0 }
  /* read on to the answer naming my claim id (records on the way: answers to others are
     ignored, work items are queued) */
  :: d_step { RUN(c) && cpc[c] == C_WAIT && MEMBER(c) && HASANS(c) ->
       x_i = cpos[c];
       do
       :: x_i < dlen && !ANSWER(x_i, c) -> x_i++
       :: else -> break
       od;
       read_upto(c, x_i);
       cpos[c] = x_i + 1;
       y_b = (Dt[x_i] == D_RECON && !QUEUED(c, x_i));   /* the answer is also the next job */
       if :: y_b -> printf("(") :: else -> skip fi;
       printf("CONNECTOR%d takes dq[%d] ", c, x_i);
       if
       :: Dt[x_i] == D_GRANT -> printf("Grant(n=%d, id=%d) as its grant\n", Dn[x_i], Dc[x_i])
       :: Dt[x_i] == D_HELD -> printf("Held(n=%d) as its answer: keeps the dispatch\n", Dn[x_i])
#if HOLDFRZ
       :: Dt[x_i] == D_AGAIN -> printf("Held(n=%d) as its answer: keeps the dispatch (key held)\n", Dn[x_i])
#endif
       :: y_b -> printf("(Reconcile/Done, n=%d) as its answer: drops the dispatch)\n", Dn[x_i])
       :: else -> printf("(Reconcile/Done, n=%d) as its answer: drops the dispatch\n", Dn[x_i])
       fi;
       if
       :: ccalled[c] ->                    /* a fast-path call went out already */
          if
          :: Dt[x_i] == D_HELD -> cfast[c] = 0; cwl[c] = Dl[x_i]; cpc[c] = C_HELDW
#if HOLDFRZ
          :: Dt[x_i] == D_AGAIN -> cfast[c] = 0; cwh[c] = 1; cpc[c] = C_HELDW
#endif
          :: else -> finish(c, y_b)
          fi
       :: else ->
          if
          :: Dt[x_i] == D_GRANT -> check(c)
          :: Dt[x_i] == D_HELD -> cwl[c] = Dl[x_i]; cpc[c] = C_HELDW
#if HOLDFRZ
          :: Dt[x_i] == D_AGAIN -> cwh[c] = 1; cpc[c] = C_HELDW
#endif
          :: else -> finish(c, y_b)
          fi
       fi;
       /* a Reconcile that answers my claim is also the next job when nothing is queued before
          it (core.py record(): the answer finishes the dispatch job, the job starts at once) */
       if
       :: cpc[c] == C_IDLE && Dt[x_i] == D_RECON && !QUEUED(c, x_i) -> reconcile_job(c, x_i, 0)
       :: else -> skip
       fi;
       x_i = 0; y_b = 0 }
  /* Held: claim again, with a new claim id, once the lease is over (now waiting for a grant) */
#if HOLDFRZ
  /* Held for a held key (claim_again, CLAIM_AGAIN_MS later): the model claims again once the key
     is not HELD (a claim while it is gets Held again and changes nothing) */
  :: d_step { RUN(c) && cpc[c] == C_HELDW && cwh[c] && st != S_HELD ->
       printf("(CONNECTOR%d claims again: the key is no longer held)\n", c);
       cfast[c] = 0; ccalled[c] = 0; cwh[c] = 0;
       claim(c) }
#define HELDWAIT(c) (!cwh[c] && lexp[(cwl[c] -> 0 : cn[c])])
#else
#define HELDWAIT(c) lexp[(cwl[c] -> 0 : cn[c])]
#endif
  :: d_step { RUN(c) && cpc[c] == C_HELDW && HELDWAIT(c) ->
       printf("(CONNECTOR%d lease %d over: claims again)\n", c, (cwl[c] -> 0 : cn[c]));
       cfast[c] = 0; ccalled[c] = 0; cwl[c] = 0;
       claim(c) }
  /* the fence: commit past the record, synchronously, as the partition's owner in the current
     generation (a removed member's commit fails: it retries until it learns, then drops the job) */
  :: d_step { RUN(c) && cpc[c] == C_FENCE && ((owner == c && !clost[c]) || !R_FENCE) ->
       if
       :: R_FENCE -> dcom = cidx[c] + 1;
          printf("CONNECTOR%d fences dq[%d]: commits dispatch offset %d\n", c, cidx[c], dcom)
       :: else -> printf("CONNECTOR%d takes dq[%d]'s pre-grant without a fence\n", c, cidx[c])
       fi;
       cpc[c] = C_FENCED }
  /* the fenced claim (produced and acknowledged) */
  :: d_step { RUN(c) && cpc[c] == C_FENCED -> claim(c) }
  /* acknowledged: the lease check against the pre-grant's lease; the call does not wait for the
     processor's answer */
  :: d_step { RUN(c) && cpc[c] == C_FACK -> check(c) }
  /* the worker's start_by check (runtime.py _call): a holder that froze before it and woke
     after the lease does not call */
  :: d_step { RUN(c) && cpc[c] == C_CHECKED && STARTBY && !cfast[c] && lexp[LX(c)] ->
       printf("CONNECTOR%d lease %d already expired: does not call\n", c, LX(c));
       cres[c] = O_NCALL; cext[c] = 0; cpc[c] = C_REPORT }
  /* put the request on the wire */
  :: d_step { RUN(c) && cpc[c] == C_CHECKED ->
       x_r = 0;
       do
       :: x_r < NREQ && ract[x_r] -> x_r++
       :: else -> break
       od;
       if
       :: x_r < NREQ ->
          ract[x_r] = 1; rw[x_r] = 1; rn[x_r] = cn[c]; ra[x_r] = Dc[cidx[c]]; rc[x_r] = c; rf[x_r] = cfen[c]; rfa[x_r] = cfast[c];
          creq[c] = x_r + 1; cresp[c] = 0; crext[c] = 0; cpc[c] = C_SENT; ccalled[c] = 1;
          printf("CONNECTOR%d sends request (attempt %d, args=%d) to the target\n", c, cn[c], ra[x_r]);
          if
          :: !cfast[c] && gsent[cn[c]] < 2 -> gsent[cn[c]]++
          :: else -> skip
          fi;
#if CHK_P1B
          assert(cfast[c] || gsent[cn[c]] <= 1);
#endif
          skip
       :: else -> ovf = 1
       fi;
       x_r = 0 }
  /* the response arrives */
  :: d_step { RUN(c) && cpc[c] == C_SENT && cresp[c] != 0 ->
       cres[c] = cresp[c]; cext[c] = crext[c]; cresp[c] = 0; crext[c] = 0; creq[c] = 0;
       cpc[c] = C_REPORT;
       printf("CONNECTOR%d gets the response\n", c) }
  /* time-out -> unknown (the response was lost, or the request still lingers) */
  :: atomic { RUN(c) && cpc[c] == C_SENT && cresp[c] == 0 && (!ract[creq[c]-1] || netf > 0) ->
       if
       :: ract[creq[c]-1] -> netf--; rw[creq[c]-1] = 0;
          printf("(CONNECTOR%d times out before the target answered, request still on the wire)\n", c)
       :: else -> printf("(CONNECTOR%d times out: the response was lost)\n", c)
       fi;
       creq[c] = 0; cres[c] = O_UNK; cext[c] = 0; cpc[c] = C_REPORT }
  /* produce the outcome (or the not_called that gives the claim up) */
  :: d_step { RUN(c) && cpc[c] == C_REPORT ->
       lappend(E_OUT, cn[c], cid[c], cres[c], cext[c]);
       if :: cres[c] == O_SUCC -> grep = grep | (1 << cext[c]) :: else -> skip fi;
       printf("CONNECTOR%d ", c); pev(llen-1); printf(" -> log[%d]\n", llen-1);
       if :: ghh[cn[c]] == c + 1 -> ghh[cn[c]] = 0 :: else -> skip fi;
       if
       :: cfast[c] && ccalled[c] && !cab[c] && R_FASTWAIT -> cpc[c] = C_WAIT  /* still needs its answer */
       :: cfast[c] && ccalled[c] && cab[c] && cearly[c] && R_FASTWAIT ->       /* its early answer */
          x_i = 0;                          /* the first answer naming the claim */
          do
          :: x_i < dlen && !ANSWER(x_i, c) -> x_i++
          :: else -> break
          od;
          if
          :: x_i < dlen && Dt[x_i] == D_HELD ->
             printf("(CONNECTOR%d acts on dq[%d] Held(n=%d), read before the revocation)\n", c, x_i, Dn[x_i]);
             cfast[c] = 0; cearly[c] = 0; cwl[c] = Dl[x_i]; cpc[c] = C_HELDW
#if HOLDFRZ
          :: x_i < dlen && Dt[x_i] == D_AGAIN ->
             printf("(CONNECTOR%d acts on dq[%d] Held(n=%d), read before the revocation)\n", c, x_i, Dn[x_i]);
             cfast[c] = 0; cearly[c] = 0; cwh[c] = 1; cpc[c] = C_HELDW
#endif
          :: else -> cpc[c] = C_COMMIT
          fi;
          x_i = 0
       :: else -> cpc[c] = C_COMMIT
       fi }
  /* the outcome is acknowledged: finish (commit the dispatch offset) */
  :: d_step { RUN(c) && cpc[c] == C_COMMIT -> finish(c, 0) }
  od
}

/* ---------------------------------------------------------------- faults on connectors */
/* a freeze after the lease check makes the holder a zombie: its clock no longer holds its
   lease's expiry back */
#define POSTCHECK(c) (cpc[c] == C_CHECKED || cpc[c] == C_SENT || cpc[c] == C_REPORT)
#define FROZE(c) if :: POSTCHECK(c) -> czomb[c] = 1; clear_holder(c) :: else -> skip fi

#define FREEZE(c) :: atomic { !ovf && frz > 0 && !cfz[c] && (IDLEFLT || cpc[c] != C_IDLE) && \
              (GAPFRZ || cpc[c] != C_CHECKED) && (WIREFRZ || cpc[c] != C_SENT) -> \
       frz--; cfz[c] = 1; FROZE(c); \
       printf("FAULT      CONNECTOR%d FREEZES (pc=%d)\n", c, cpc[c]) }
#define WAKE(c) :: atomic { cfz[c] -> cfz[c] = 0; printf("FAULT      CONNECTOR%d wakes up\n", c); \
       if :: clost[c] -> clost[c] = 0; abandon(c) \
          :: clost[c] && ZOMBIE -> printf("(CONNECTOR%d does not know yet it left the group)\n", c) \
          :: !clost[c] -> skip fi }
#define LEARN(c) :: atomic { ZOMBIE && clost[c] && !cfz[c] -> clost[c] = 0; \
       printf("(CONNECTOR%d learns in its poll that the partition is gone)\n", c); abandon(c) }

proctype Faults() {
end_f:
  do
  /* SIGKILL at any point of a job; the process restarts with an empty memory */
  :: atomic { !ovf && ccrash > 0 && (cpc[0] != C_IDLE || cpc[1] != C_IDLE) ->
       ccrash--;
       if
       :: cpc[0] != C_IDLE -> x_k = 0
       :: cpc[1] != C_IDLE -> x_k = 1
       fi;
       if
       :: creq[x_k] != 0 -> rw[creq[x_k]-1] = 0     /* its request, if any, goes on alone */
       :: else -> skip
       fi;
       printf("FAULT      CONNECTOR%d CRASHES (pc=%d) and restarts\n", x_k, cpc[x_k]);
       x_r = x_k; clear_holder(x_r); x_k = x_r;
       reset_job(x_k); creq[x_k] = 0; cresp[x_k] = 0; crext[x_k] = 0; cfz[x_k] = 0;
       clost[x_k] = 0; chand[x_k] = 0; cid[x_k] = 0;
       if :: !R_CLAIMID && PERINC -> cinc[x_k]++ :: else -> skip fi;
       if
       :: owner == x_k -> if :: assign(0) :: assign(1) fi;
          printf("FAULT      rebalance: partition -> CONNECTOR%d from committed offset %d\n", owner, dcom)
       :: else -> skip
       fi;
       x_k = 0; x_r = 0 }
  FREEZE(0)
  FREEZE(1)
  WAKE(0)
  WAKE(1)
#if ZOMBIE
  LEARN(0)
  LEARN(1)
#endif
  /* rebalance: the partition moves to the other instance (session time-out of a frozen owner,
     max.poll.interval, scaling); the old owner's jobs are revoked */
  :: atomic { !ovf && reb > 0 && (IDLEFLT || cpc[owner] != C_IDLE) ->
       reb--; x_r = owner; x_k = 1 - owner; assign(x_k); x_k = 0;
       printf("FAULT      rebalance: partition -> CONNECTOR%d from committed offset %d\n", owner, dcom);
       revoke(x_r); x_r = 0 }
  od
}

/* ---------------------------------------------------------------- network + target */
inline serve(r) {
  if
  :: DEDUP && teff > 0 -> x_k = O_SUCC; x_j = 1;      /* the same key again: the original receipt */
     printf("TARGET     COMMITS nothing new: deduplicates the request of attempt %d (original receipt, from CONNECTOR%d)\n", rn[r], rc[r])
  :: else ->
     if
     :: true -> x_k = O_SUCC;
        teff++; x_j = teff;
        printf("TARGET     COMMITS EFFECT #%d (attempt %d, args=%d, from CONNECTOR%d)\n", teff, rn[r], ra[r], rc[r]);
        if
        :: lexp[RL(r)] || (rfa[r] && rn[r] == 1 && gfl && lexp[0]) ->  /* a fast call: after the grant's lease */
           tlatem = tlatem | (1 << teff); printf("(after lease %d expired)\n", RL(r))
        :: else -> skip
        fi;
#if CHK_P45
        assert(gacc);                       /* P5: no effect without an accepted intent */
        assert(ra[r] == gargs);             /* P4: never the conflicting arguments */
#endif
#if CHK_P3
        assert(teff <= 1 || (P3RELAX && tlatem != 0));  /* P3 (a: strict, b: relaxed) */
#endif
        skip
     :: tfail > 0 -> tfail--; x_k = O_RETRY; x_j = 0;
        printf("TARGET     rejects request of attempt %d before commit (5xx)\n", rn[r])
     :: tfail > 0 && PERM -> tfail--; x_k = O_PERM; x_j = 0;
        printf("TARGET     rejects request of attempt %d permanently\n", rn[r])
     fi
  fi;
  if
  :: rw[r] && creq[rc[r]] == r + 1 && cpc[rc[r]] == C_SENT ->
     if
     :: cresp[rc[r]] = x_k; crext[rc[r]] = x_j
     :: netf > 0 -> netf--;
        printf("(NETWORK    drops the response to CONNECTOR%d)\n", rc[r])
     fi
  :: else -> skip
  fi;
  ract[r] = 0; rw[r] = 0; rf[r] = 0; rfa[r] = 0; rn[r] = 0; ra[r] = 0; rc[r] = 0; x_k = 0; x_j = 0
}

#define SERVE(r) :: atomic { !ovf && ract[r] -> serve(r) }
#define LOSE(r)  :: atomic { !ovf && ract[r] && !rw[r] -> ract[r] = 0; rf[r] = 0; rfa[r] = 0; rn[r] = 0; ra[r] = 0; rc[r] = 0; \
                              printf("(NETWORK    loses an abandoned request)\n") }

proctype Target() {
end_t:
  do
  SERVE(0)
  SERVE(1)
  SERVE(2)
  LOSE(0)
  LOSE(1)
  LOSE(2)
  od
}

/* ---------------------------------------------------------------- leases */
/* Leases end in the order they start: attempt n's lease starts with its first claim, after
   attempt n-1's first claim, and every lease has the same length (the connector's lease_ms).
   The pre-grant's lease (index 0, pregrant_lease_ms long) ends before attempt 1's own lease
   (a plain grant of attempt 1 comes only after it) and before attempt 2's: a fenced holder's
   grant carries lease_until_ms = pregrant_until_ms, and attempt 2 after a reconciliation or an
   operator starts no earlier than that lease (transitions.after_lease: not_before).
   A live, non-zombie holder inside its call (and, with R_LEASEREP, until its outcome is
   recorded) holds its lease's expiry back: the lease covers the call and the report */
#define MIDCALL(c,n) (cpass[c] && LX(c) == n && !cfz[c] && !czomb[c] && \
                      (cpc[c] == C_CHECKED || cpc[c] == C_SENT || (R_LEASEREP && cpc[c] == C_REPORT)))
#define ONWIRE(n) (BOUNDED && ((ract[0] && RL(0) == n) || (ract[1] && RL(1) == n) || (ract[2] && RL(2) == n)))
#define WAITGRANT(c,n) (cpc[c] == C_WAIT && cn[c] == n && !cfz[c] && !ccalled[c] && \
                        (ggrant[n] == 0 || ggrant[n] == cid[c]))
#define EXPIRE(n) :: atomic { !ovf && lst[n] && !lexp[n] && (n == 1 || lexp[n-1] || !lst[n-1]) && \
                              (n != 1 || !PREGRANT || lexp[0] || !lst[0] || !R_PLAINHELD) && \
                              (n != 2 || !PREGRANT || lexp[0] || !lst[0]) && \
                              !MIDCALL(0,n) && !MIDCALL(1,n) && !ONWIRE(n) && \
                              (slow != 0 || !(WAITGRANT(0,n) || WAITGRANT(1,n))) -> lexp[n] = 1; \
                              if :: (WAITGRANT(0,n) || WAITGRANT(1,n)) && slow > 0 -> slow-- :: else -> skip fi; \
                              printf("TIME       lease of attempt %d expires\n", n) }

/* the pre-grant's lease: from the pre-granted Dispatch; a live fenced holder inside its call or
   report holds it back, and so does its request on the wire */
#if FENCEDUE
/* (FENCEDUE) nor does a live connector between its fence and its fenced claim */
#define FENCING(c) (!cfz[c] && (cpc[c] == C_FENCE || cpc[c] == C_FENCED))
#define EXPIRE0 :: atomic { !ovf && lst[0] && !lexp[0] && !MIDCALL(0,0) && !MIDCALL(1,0) && !ONWIRE(0) && \
                            !FENCING(0) && !FENCING(1) -> \
                            lexp[0] = 1; printf("TIME       the pre-grant's lease expires\n") }
#else
#define EXPIRE0 :: atomic { !ovf && lst[0] && !lexp[0] && !MIDCALL(0,0) && !MIDCALL(1,0) && !ONWIRE(0) -> \
                            lexp[0] = 1; printf("TIME       the pre-grant's lease expires\n") }
#endif

proctype Clock() {
end_k:
  do
#if PREGRANT
  EXPIRE0
#endif
  EXPIRE(1)
  EXPIRE(2)
  EXPIRE(3)
#if NMAX > 3
  EXPIRE(4)
#endif
#if NMAX > 4
  EXPIRE(5)
#endif
  od
}

/* the processor's deadline (deadlines.py): once the current attempt's lease has expired, a
   Timer decided at this point of the log reconciles a silent holder (DISPATCHED) or hands a
   reconciliation without result to an operator (RECONCILING). Appended only when it acts,
   with the processor caught up: the Tick it rides on is the next record decided. */
proctype Deadline() {
end_d:
  do
  :: atomic { !ovf && tmr > 0 && poff == llen && pn > 0 &&
              (((st == S_DISP || st == S_REC) && lexp[PLX]) || (STALL && st == S_RES && pstall != pn)) ->
       tmr--;
       lappend(E_TIMER, pn, TIMERID, lexp[PLX], 0);
       printf("(TIME       the deadline of attempt %d passes: Timer -> log[%d])\n", pn, llen-1) }
  od
}

/* ---------------------------------------------------------------- operator */
proctype Operator() {
end_o:
  do
  :: atomic { !ovf && st == S_NOP && lexp[PLX] && !opdone[pn] ->   /* only after lease expiry */
       opdone[pn] = 1;
       printf("OPERATOR   inspects the target (%d effects) after lease %d expired\n", teff, PLX);
       if
       :: teff > 0 -> lappend(E_OPRES, pn, OPID, OP_APPLIED, 1)
       :: teff == 0 -> lappend(E_OPRES, pn, OPID, OP_NOTAPP, 0)
       :: teff == 0 -> lappend(E_OPRES, pn, OPID, OP_FAILED, 0)
       fi;
       printf("OPERATOR   "); pev(llen-1); printf(" -> log[%d]\n", llen-1) }
#if HOLDFRZ
  /* freezes in hold mode (containment.py), each scope frozen once and unfrozen once, at any point
     of the processor's input log (a Containment record), appended while the processor is caught
     up (as a Timer is: the events after it are still appended in any order) */
  :: atomic { !ovf && poff == llen && ofz < HOLDFRZ && (!HOLDOVL || ofz == 0 || !(ounf & 1)) ->
       ofz++; lappend(E_FRZ, ofz, 0, 0, 0);
       printf("OPERATOR   "); pev(llen-1); printf(" -> log[%d]\n", llen-1) }
  :: atomic { !ovf && poff == llen && ofz >= 1 && !(ounf & 1) ->
       ounf = ounf | 1; lappend(E_UNF, 1, 0, 0, 0);
       printf("OPERATOR   "); pev(llen-1); printf(" -> log[%d]\n", llen-1) }
  :: atomic { !ovf && poff == llen && ofz >= 2 && !(ounf & 2) ->
       ounf = ounf | 2; lappend(E_UNF, 2, 0, 0, 0);
       printf("OPERATOR   "); pev(llen-1); printf(" -> log[%d]\n", llen-1) }
#endif
  od
}

/* ---------------------------------------------------------------- quiescence */
/* Every fault has a budget and every step uses up a bounded resource, so every run is finite;
   a run ends only when nothing is enabled (timeout), so every maximal run is weakly fair. */
proctype Monitor() {
  timeout ->
#if CHK_P6
  assert(ovf || !gacc || st == S_SUCC || st == S_FAIL || st == S_NOP);
#endif
#if CHK_P6B
  assert(ovf || ((st != S_SUCC || teff > 0) &&
                 (st != S_FAIL || ((1 << (teff + 1)) - 2) == tlatem)));
#endif
#if CHK_P6C
  assert(ovf || ((cpc[0] == C_IDLE || cfz[0]) && (cpc[1] == C_IDLE || cfz[1])));
#endif
#if CHK_P8
  assert(ovf || teff < 2 || (grep & tlatem) == 0 || galdup);
#endif
#if CHK_P9
  assert(ovf || !galdup || teff >= 2 || tlatem != 0);
#endif
#if CHK_BOUND
  assert(!ovf);
#endif
  skip
}

init {
  atomic {
    owner = 0;
    run Processor();
    run Connector(0);
    run Connector(1);
    run Faults();
    run Target();
    run Clock();
    run Deadline();
    run Operator();
    run Monitor();
    run Agent(1);
#if NSAME > 1
    run Agent(1);
#endif
#if CONFLICT
    run Agent(2);
#endif
  }
}
