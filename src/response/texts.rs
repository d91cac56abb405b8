//! Every word the default pages show, so they can be translated.

use std::time::Duration;

use super::lang::plural;

/// The words of the default pages, in English by default. Translate by changing the fields:
///
/// ```
/// use tower_waiting_room::response::{DefaultRenderer, Texts};
///
/// let mut de = Texts::default();
/// de.lang = "de".into();
/// de.waiting_title = "Sie sind in der Warteschlange".into();
/// de.position = "Sie sind Nummer {position} in der Schlange".into();
/// de.thousands_separator = ".".into();
/// // ... the other fields ...
/// let renderer = DefaultRenderer::new().with_texts(de);
/// # let _ = renderer;
/// // WaitingRoomLayer::builder("shop").renderer(renderer) ...
/// ```
///
/// Texts are plain text: the renderer HTML-escapes them. Some hold placeholders in braces, named
/// in each field's documentation, which are replaced by formatted numbers.
///
/// A text with a number may give one form per plural category of its language (the CLDR's
/// `zero`, `one`, `two`, `few`, `many`, `other`), each after its category and a colon,
/// separated by `|`: `"one:About {minutes} minute|other:About {minutes} minutes"`. The form of
/// the number's category is used, else `other`; a text without forms is used for every number.
/// Which number picks the form is said in the field's documentation.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Texts {
    /// The pages' language, for `<html lang>`: `en`.
    pub lang: String,
    /// The small label above every heading: "Waiting room".
    pub eyebrow: String,
    /// Heading and title while in line: "You are in line".
    pub waiting_title: String,
    /// The place in line, with `{position}`: "You are number {position} in line". The number is
    /// shown large; the whole sentence is the page's live region for screen readers. Its plural
    /// form goes by the position.
    pub position: String,
    /// Label of the number of people ahead: "Ahead of you".
    pub ahead_label: String,
    /// Label of the number of people in line: "In line".
    pub waiting_label: String,
    /// Label of the estimated wait: "Estimated wait".
    pub eta_label: String,
    /// The estimate under a minute: "Almost there".
    pub eta_almost_there: String,
    /// The estimate under an hour, with `{minutes}`: "About {minutes} min". Its plural form goes
    /// by the minutes.
    pub eta_minutes: String,
    /// The estimate from an hour, with `{hours}` and `{minutes}`: "About {hours} h {minutes}
    /// min". Its plural form goes by the hours.
    pub eta_hours: String,
    /// When nobody was let in lately, so there is no estimate: "Unknown: nobody has been let in
    /// for a few minutes".
    pub eta_unknown: String,
    /// That the page updates by itself.
    pub auto_update: String,
    /// The status could not be fetched, with `{seconds}` until the next try (its plural form
    /// goes by them).
    pub error: String,
    /// Shown while the page takes an admitted visitor in.
    pub letting_in: String,
    /// The leave button: "Leave the line".
    pub leave_button: String,
    /// Heading after leaving: "You left the line".
    pub left_title: String,
    /// Message after leaving.
    pub left_message: String,
    /// Link after leaving: "Back to the site".
    pub back_to_site: String,
    /// Heading when the place is gone (left in another tab, or expired): "You are no longer in
    /// line".
    pub gone_title: String,
    /// Message when the place is gone.
    pub gone_message: String,
    /// Link to join the line again.
    pub rejoin: String,
    /// The estimate while the room is too young to know its pace: "Estimating…".
    pub eta_estimating: String,
    /// An uncertain estimate as a range of minutes, with `{low}` and `{high}`: "{low}–{high} min".
    /// Its plural form goes by `{high}`.
    pub eta_range: String,
    /// The estimate while the room is paused: "Paused: the line moves again soon".
    pub eta_paused: String,
    /// Heading when the sale is closed: "The sale is closed".
    pub closed_title: String,
    /// Message when the sale is closed.
    pub closed_message: String,
    /// Heading when the visitor's session was banned: "You cannot enter".
    pub banned_title: String,
    /// Message when the visitor's session was banned.
    pub banned_message: String,
    /// Heading when the room refused a new visitor as too risky (a listed network, or the
    /// app's hook): "We cannot let you in".
    pub refused_title: String,
    /// Message when the room refused a new visitor.
    pub refused_message: String,
    /// Heading when the line is full.
    pub full_title: String,
    /// Message when the line is full.
    pub full_message: String,
    /// Heading when the waiting room cannot be reached (fail-closed).
    pub unavailable_title: String,
    /// Message when the waiting room cannot be reached.
    pub unavailable_message: String,
    /// Heading when the waiting room is busy (its store is out of memory).
    pub busy_title: String,
    /// Message when the waiting room is busy.
    pub busy_message: String,
    /// Heading when the visitor sent too many requests (a limit of the room).
    pub limited_title: String,
    /// Message when the visitor sent too many requests.
    pub limited_message: String,
    /// Heading while the browser solves its proof-of-work challenge.
    pub challenge_title: String,
    /// Message while the browser solves its challenge.
    pub challenge_message: String,
    /// When the browser cannot solve the challenge (no WebCrypto: it needs https).
    pub challenge_unsupported: String,
    /// Link on the full, unavailable, busy, limited and challenge pages: "Try again now".
    pub try_again: String,
    /// Between groups of three digits: `,` (1,342).
    pub thousands_separator: String,
    /// The smallest number written in groups: 1 000 (`1,342`); 10 000 where a language leaves
    /// four digits together (Spanish, Italian and Polish write `1342` and `13 420`).
    pub grouping_from: u64,
    /// The ten digits, 0 to 9, as the language writes numbers: `0123456789`; Persian's
    /// `۰۱۲۳۴۵۶۷۸۹` (the CLDR writes plain Arabic with `0123456789` since its version 46).
    pub digits: String,
    /// The writing direction of the pages, `ltr` or `rtl` (Arabic, Persian): the page's `dir`,
    /// and its layout mirrored.
    pub dir: String,
    /// Heading before a scheduled opening (shown without JavaScript; the countdown replaces
    /// it): "The sale opens soon".
    pub scheduled_title: String,
    /// Message before a scheduled opening.
    pub scheduled_message: String,
    /// The countdown to a scheduled opening, with `{time}` (`m:ss` or `h:mm:ss`):
    /// "Opens in {time}".
    pub scheduled_countdown: String,
}

impl Default for Texts {
    fn default() -> Self {
        let s = |s: &str| s.to_owned();
        Self {
            lang: s("en"),
            eyebrow: s("Waiting room"),
            waiting_title: s("You are in line"),
            position: s("You are number {position} in line"),
            ahead_label: s("Ahead of you"),
            waiting_label: s("In line"),
            eta_label: s("Estimated wait"),
            eta_almost_there: s("Almost there"),
            eta_minutes: s("About {minutes} min"),
            eta_hours: s("About {hours} h {minutes} min"),
            eta_unknown: s("Unknown: nobody has been let in for a few minutes"),
            auto_update: s(
                "This page updates by itself. Keep it open: when it is your turn, \
                            it takes you in.",
            ),
            error: s("Cannot reach the waiting room. Trying again in {seconds} s."),
            letting_in: s("It is your turn. Taking you in\u{2026}"),
            leave_button: s("Leave the line"),
            left_title: s("You left the line"),
            left_message: s("Your place has been given up, so the line moves on without you."),
            back_to_site: s("Back to the site"),
            gone_title: s("You are no longer in line"),
            gone_message: s("Your place was given up (perhaps in another tab) or has expired."),
            rejoin: s("Join the line again"),
            full_title: s("The line is full"),
            full_message: s(
                "So many people are waiting that the line is full. This page \
                             tries again by itself in a moment.",
            ),
            unavailable_title: s("Please try again soon"),
            unavailable_message: s("The waiting room cannot be reached right now. This page \
                                    tries again by itself."),
            eta_paused: s("Paused: the line moves again soon"),
            eta_estimating: s("Estimating…"),
            eta_range: s("{low}–{high} min"),
            closed_title: s("The sale is closed"),
            closed_message: s(
                "The sale is not open right now. If you were in line, you keep \
                               your place while this page stays open; it looks again by itself.",
            ),
            banned_title: s("You cannot enter"),
            banned_message: s("The site's operators ended your visit."),
            refused_title: s("We cannot let you in"),
            refused_message: s(
                "This site does not take visitors from your network or your software right \
                 now. If you use an ordinary browser, try again from another network (not a \
                 VPN or a hosting provider's).",
            ),
            busy_title: s("Very busy right now"),
            busy_message: s("The waiting room is very busy. This page tries again in a moment."),
            limited_title: s("Too many requests"),
            limited_message: s(
                "Your connection sent more requests than the waiting room allows. \
                 This page tries again by itself in a moment.",
            ),
            challenge_title: s("Checking your browser"),
            challenge_message: s(
                "Before you join the line, your browser solves a small puzzle that keeps bots \
                 from taking places. This takes a few seconds; keep this page open.",
            ),
            challenge_unsupported: s(
                "Your browser cannot do this check here: it needs JavaScript and a secure \
                 (https) connection.",
            ),
            try_again: s("Try again now"),
            thousands_separator: s(","),
            grouping_from: 1_000,
            digits: s("0123456789"),
            dir: s("ltr"),
            scheduled_title: s("The sale opens soon"),
            scheduled_message: s(
                "You are registered. At the opening, everyone registered before it gets a place \
                 in line in a random order, so arriving early gives no advantage and reloading \
                 changes nothing. Keep this page open: it joins the line by itself.",
            ),
            scheduled_countdown: s("Opens in {time}"),
        }
    }
}

impl Texts {
    /// `n` as the language writes it: its digits, grouped by the thousands separator from
    /// `grouping_from` on: `1,342`.
    pub fn number(&self, n: u64) -> String {
        plural::number(
            n,
            &self.digits,
            &self.thousands_separator,
            self.grouping_from,
        )
    }

    /// The form of `text` (one of these texts) for the number `n`, by the plural rules of
    /// [`lang`](Self::lang) (see the type's docs).
    pub fn form<'t>(&self, text: &'t str, n: u64) -> &'t str {
        if !plural::has_forms(text) {
            return text;
        }
        plural::form(text, plural::category(&self.lang, n))
    }

    /// The estimate of a waiting answer as people read it: [`eta`](Self::eta) of the shown value,
    /// or a range of minutes ([`eta_range`](Self::eta_range)) when the likely range spans
    /// several minutes below the hour; "estimating" when the room does not know its pace yet.
    pub fn eta_of(
        &self,
        eta: Option<Duration>,
        range: Option<(Duration, Duration)>,
        estimating: bool,
    ) -> String {
        if eta.is_none() && estimating {
            return self.eta_estimating.clone();
        }
        if let (Some(eta), Some((low, high))) = (eta, range) {
            let (low, high) = (
                low.as_secs().div_ceil(60).max(1),
                high.as_secs().div_ceil(60),
            );
            if eta.as_secs() >= 60 && high < 60 && high > low {
                return self
                    .form(&self.eta_range, high)
                    .replace("{low}", &self.number(low))
                    .replace("{high}", &self.number(high));
            }
        }
        self.eta(eta)
    }

    /// The estimated wait as people read it: under a minute "almost there", then whole minutes
    /// rounded up, then hours and minutes; `None` is [`eta_unknown`](Self::eta_unknown).
    pub fn eta(&self, eta: Option<Duration>) -> String {
        let Some(eta) = eta else {
            return self.eta_unknown.clone();
        };
        let secs = eta.as_secs();
        if secs < 60 {
            return self.eta_almost_there.clone();
        }
        let minutes = secs.div_ceil(60);
        if minutes < 60 {
            return self
                .form(&self.eta_minutes, minutes)
                .replace("{minutes}", &self.number(minutes));
        }
        self.form(&self.eta_hours, minutes / 60)
            .replace("{hours}", &self.number(minutes / 60))
            .replace("{minutes}", &self.number(minutes % 60))
    }

    /// The sentence around the position `position`, split at `{position}`: (before, after).
    pub(crate) fn position_parts(&self, position: u64) -> (&str, &str) {
        let sentence = self.form(&self.position, position);
        sentence.split_once("{position}").unwrap_or((sentence, ""))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eta_is_said_as_people_say_it() {
        let t = Texts::default();
        let eta = |s| t.eta(Some(Duration::from_secs(s)));
        assert_eq!(eta(0), "Almost there");
        assert_eq!(eta(59), "Almost there");
        assert_eq!(eta(60), "About 1 min");
        assert_eq!(eta(61), "About 2 min", "rounded up");
        assert_eq!(eta(59 * 60), "About 59 min");
        assert_eq!(eta(3_600), "About 1 h 0 min");
        assert_eq!(eta(8_052), "About 2 h 15 min");
        assert!(t.eta(None).starts_with("Unknown"));
    }

    #[test]
    fn position_sentence_splits_around_the_number() {
        let t = Texts::default();
        assert_eq!(t.position_parts(7), ("You are number ", " in line"));
        let other = Texts {
            position: "Platz {position}".into(),
            ..Texts::default()
        };
        assert_eq!(other.position_parts(7), ("Platz ", ""));
    }
}
