// Package fairqueue provides the shared workqueue of widgethub's multicluster
// controllers, one that serves member clusters fairly.
//
// multicluster-runtime feeds the requests of every engaged member into one queue
// per controller. A first-in first-out queue lets a member that has just queued
// thousands of requests, say the initial list of a newly engaged member or a
// flood of changes, delay every other member's requests until its own are done.
// This queue keeps one sub-queue per member instead and hands out requests round
// robin: each member with a ready request gets one turn per round, in the order
// the members became ready, so a request of a quiet member waits for at most one
// request of each other busy member, however long their backlogs are. Within a
// member, requests are served by priority (higher first, as controller-runtime's
// priority queue defines it) and first in, first out within a priority. Priority
// never lets a member take more than its turn.
//
// Options.MaxInFlightPerMember bounds the requests of one member that are handed
// out and not yet done: a member at its bound sits out of the round until one of
// its requests is done. Workers are shared, and a member whose API server hangs
// would otherwise end up holding every one of them; with the bound set below the
// number of workers, the others always have workers left.
//
// One bound per member is not enough when several members hang at once: two
// members at three quarters each hold every worker. With Options.Workers (the
// number of workers calling Get) set, the queue also bounds the unresponsive
// members as a whole. A member is unresponsive while it is silent (the last of
// its requests to be done was not answered: it was reclaimed, see below, or
// done only after Options.StallAfter, 5s by default, as one given up on its
// deadline is), or while its oldest request in flight has gone unanswered (no
// request of the member has been answered since it was handed out; not in a
// queue of one key per member, Options.OneKeyPerMember, where every request
// in flight is so) or has been in flight for StallAfter. The rule: the
// unresponsive members hold between them at most
// UnresponsiveBound(Workers, MaxInFlightPerMember) requests in flight, the
// per-member bound and never every worker; while they
// hold that many, they sit out of the round, and a member that answers takes
// their turns. A member with nothing in flight that is not silent is not
// unresponsive, so it always gets one request: a member that has not been
// seen to hang is given the chance to answer. That exception costs at most
// one worker per member that hangs, and the next rule takes it back.
//
// The two bounds limit what members are given, not what they hold: members
// that answer, each up to its bound, may hold every worker between them, and
// then all go silent at the same moment (a network partition, a shared proxy
// that stops). So the queue also takes workers back. While a member with a
// request ready and nothing in flight that is not silent (a quiet member)
// waits, and every worker has been busy for Options.ReclaimAfter (100ms by
// default) without one coming free, the queue cancels the request held
// longest, once for each such member, and gives the freed workers to those
// members before any other. It cancels the context the request's worker
// processes it with, which Context returns (the cause is ErrWorkerReclaimed);
// the request then fails and is retried like any failure, and its member is
// silent until it answers again (or until the queue forgets it, holding no
// request of it). So however many members go silent at once, and however many
// workers each held when it did, a quiet member's request is handed out within
// ReclaimAfter of the last worker being taken, and at once when every worker
// has already been held that long, plus the time a cancelled request takes to
// return: a Widget reconcile's calls to a member
// return as soon as their context ends. A reconcile that ignores its context
// keeps its worker until it returns; nothing but cancelling can take a worker
// from a goroutine. A member that goes silent with nothing in flight looks
// quiet until its first request hangs, so it may have one worker reclaimed
// for it, once.
//
// Of the three ways to keep workers for quiet members, the queue cancels. A
// reserve (workers only quiet members may take) does not hold for any number
// of silent members: any worker handed to any member is held for good if that
// member goes silent right after, and the workers are a fixed pool of
// goroutines, so as many quiet members going silent as the reserve is large
// exhaust it. Preempting a worker is cancelling its request: a goroutine
// cannot be taken otherwise. Cancelling costs what a silent member's request
// was bound to cost anyway (a failure and a retry), and only when a quiet
// member waits: while workers come free, however slowly, nothing is cancelled,
// and a quiet member waits for its turn, one request of each member ahead of
// it in the round. A request of a member that answers is cancelled only when
// every worker has gone ReclaimAfter without coming free, which members that
// answer promptly do not do: their requests end in milliseconds, one after the
// other. Members that answer late, with requests handed out together, can:
// then one of their requests is cancelled and retried, and their member
// counts as silent until its next answer; that is the price of a quiet
// member's latency, which a longer ReclaimAfter would raise.
//
// The signs of an unresponsive member catch different failures without
// waiting on a clock for the common one. A member that stops answering does
// not answer its first request, so the bound holds from the moment it hangs,
// even when it had a backlog and several members hang together, before any of
// them could be seen as slow. A member that answers some requests and hangs on
// others (one namespace's writes held, Retry-After on some requests) counts
// from StallAfter on. A member that was answering when it went silent holds
// what it held until a quiet member needs a worker, and is silent from the
// first request reclaimed from it. A member whose requests are being answered
// goes on up to its own bound, however many members hang beside it. The price
// is paid by a member that starts from nothing in flight while the bound is
// full: until one of its requests is answered it is unresponsive too, so it
// goes one request at a time until the hanging members' requests end; and by
// a silent member that answers again, which waits for room within the bound
// (the hanging members' deadlines, or their requests reclaimed) before its
// first answer shows.
//
// Cancel ends the context of one request in flight with a cause of the
// caller's, for a request whose object went: its work stops at once, and its
// member counts neither as answering nor as silent for it.
//
// Apart from the order, the queue keeps the guarantees of client-go's workqueue and
// controller-runtime's priority queue: a request added again before it is handed
// out is handed out once; a request that is being processed is never handed out
// to a second worker, and if it is added meanwhile it is queued again when Done is
// called; AddRateLimited delays a request by its rate limiter's backoff, which
// Forget resets; AddAfter delays a request, and the earliest of several delays
// wins. ShutDown makes Get return at once, as controller-runtime's default queue
// does, while ShutDownWithDrain keeps handing out the queued requests until none
// is ready or in flight. A member's sub-queue exists only while it holds a request,
// so members that come and go leave nothing behind.
//
// The queue implements controller-runtime's priorityqueue.PriorityQueue, so a
// controller uses it as is rather than through its wrapper for plain queues and
// keeps the priority of a request when it requeues it. New has the signature of
// the controller's NewQueue option. Fairness must not rest on priorities, though:
// controller-runtime's handlers add the objects of an initial list at
// handler.LowPriority, but multicluster-runtime's sources (v0.24) neither mark
// initial lists nor hand their handlers a queue that accepts priorities, so
// every request of a member's sources arrives at the default priority. Taking
// turns is what keeps a newly engaged member's initial list behind the other
// members' live changes.
//
// # Exit plan
//
// The queue is written here, not forked. controller-runtime's priority queue
// is growing an optional fairness extractor (controller-runtime pull request
// 3261, open when this was written): items are handed out fairly across
// dimensions such as the cluster, within a priority. Once a controller-runtime
// release has it, this package can go if that queue (with the cluster name as
// the dimension) also gives what the tests here check: a per-member bound on
// requests in flight, the bound of the unresponsive members as a whole,
// workers taken back for quiet members, and a fairness that does not rest on
// priorities, since
// multicluster-runtime's sources add every request at the default priority.
package fairqueue
