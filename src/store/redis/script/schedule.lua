-- The schedule: a pre-queue before the opening, a closing after which newcomers are refused.
--
-- Schedule (the `schedule` argument, when present): before opens_at nobody is admitted (no
-- promotion, no direct admission, admit_next lets nobody in); a newcomer joins the pre-queue with the score
-- draw / 2^52 - 1 (exact in a double, and written with %.17g so Redis reads the same double) and
-- gets {11}; a waiter's check-in is recorded as opens_at, so silence counts from the opening.
-- The order of the pre-queue is thus fixed on arrival, and at the opening nothing moves: the
-- registrants are simply at the front of the line, later arrivals behind them by sequence
-- number. From closes_at newcomers get {6}; with keep line 0, everyone without a slot does and
-- nobody is promoted (as a close). The first registrant's arrival is noted at score -1 for the
-- oldest wait. The room's pace is measured from the opening (the "ms since the room was first
-- seen" of the pace counts from there), so a room that just opened is estimating, not stalled.
-- A malformed schedule argument is refused with an error (the gateway then answers as for a
-- store outage before the opening: scheduled), never read as no schedule, and before any write.
-- The schedule is kept in the settings key, so a call without one (a gateway built without it,
-- in a rolling deploy) still admits nobody before a kept future opening; its newcomers have no
-- draw and are registered by sequence number, behind the drawn registrants. A pre-queue opened
-- while waiters with sequence numbers are in line (an earlier opening's line) registers
-- newcomers by sequence number too: a draw would put them ahead of people already waiting.

-- Before the opening: nobody admitted; check-ins count as of the opening. After the closing:
-- newcomers refused; `line_closed` when the line is not kept either.
function F.apply_schedule()
  R.before_opening = R.opens_at ~= nil and R.now < R.opens_at
  R.check_in_at = R.before_opening and R.opens_at or R.now
  R.after_closing = R.closes_at ~= nil and R.now >= R.closes_at
  R.line_closed = R.after_closing and not R.keep_line
end
