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
// members as a whole. A member is unresponsive while its oldest request in
// flight has gone unanswered (no request of the member has been done since it
// was handed out) or has been in flight for Options.StallAfter (5s by
// default). The rule: the unresponsive members hold between them at most
// UnresponsiveBound(Workers, MaxInFlightPerMember) requests in flight, the
// per-member bound and never every worker; while they hold that many, they sit
// out of the round, and a member that answers takes their turns. A member with
// nothing in flight is not unresponsive, so it always gets one request; that is
// the one exception, and it costs at most one worker per member that hangs. So
// however many members hang, the others keep Workers minus the bound (a quarter
// with the operator's defaults, 8 of 32), less one per member that hung while
// the bound was already full.
//
// The two signs catch different failures without waiting on a clock for the
// common one. A member that stops answering does not answer its first request,
// so the bound holds from the moment it hangs, even when it had a backlog and
// several members hang together, before any of them could be seen as slow. A
// member that answers some requests and hangs on others (one namespace's
// writes held, Retry-After on some requests) counts from StallAfter on. A
// member whose requests are being answered goes on up to its own bound,
// however many members hang beside it. The price is paid by a member that
// starts from nothing in flight while the bound is full: until one of its
// requests is answered it is unresponsive too, so it goes one request at a
// time until the hanging members' requests end. Requests
// of an unresponsive member end when their deadlines (per member request and
// per reconcile) pass; Done with them counts as an answer, but a request left
// in flight is by then older than StallAfter, so the member stays unresponsive
// until it has nothing in flight or answers a request it was just handed.
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
// requests in flight, and a fairness that does not rest on priorities, since
// multicluster-runtime's sources add every request at the default priority.
package fairqueue
