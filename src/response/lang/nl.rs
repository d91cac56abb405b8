//! Dutch (`nl`): the default pages' texts.

use crate::response::Texts;

/// The texts in Dutch.
pub(super) fn texts() -> Texts {
    let s = |s: &str| s.to_owned();
    Texts {
        lang: s("nl"),
        eyebrow: s("Wachtruimte"),
        waiting_title: s("Je staat in de wachtrij"),
        position: s("Je bent nummer {position} in de wachtrij"),
        ahead_label: s("Voor je"),
        waiting_label: s("In de wachtrij"),
        eta_label: s("Geschatte wachttijd"),
        eta_almost_there: s("Bijna aan de beurt"),
        eta_minutes: s("Ongeveer {minutes} min"),
        eta_hours: s("Ongeveer {hours} uur {minutes} min"),
        eta_unknown: s("Onbekend: er is al een paar minuten niemand binnengelaten"),
        auto_update: s(
            "Deze pagina wordt vanzelf bijgewerkt. Laat hem open: als je aan de beurt bent, word \
             je binnengelaten.",
        ),
        error: s(
            "one:De wachtruimte is niet bereikbaar. Nieuwe poging over {seconds} seconde.\
             |other:De wachtruimte is niet bereikbaar. Nieuwe poging over {seconds} seconden.",
        ),
        letting_in: s("Je bent aan de beurt. Je wordt binnengelaten\u{2026}"),
        leave_button: s("Wachtrij verlaten"),
        left_title: s("Je hebt de wachtrij verlaten"),
        left_message: s("Je plek is opgegeven, dus de wachtrij gaat zonder jou verder."),
        back_to_site: s("Terug naar de website"),
        gone_title: s("Je staat niet meer in de wachtrij"),
        gone_message: s("Je plek is opgegeven (misschien in een ander tabblad) of verlopen."),
        rejoin: s("Opnieuw aansluiten"),
        eta_estimating: s("Wordt geschat\u{2026}"),
        eta_range: s("{low}–{high} min"),
        eta_paused: s("Gepauzeerd: de wachtrij gaat zo weer verder"),
        closed_title: s("De verkoop is gesloten"),
        closed_message: s(
            "De verkoop is nu niet open. Stond je in de wachtrij, dan houd je je plek zolang deze \
             pagina open blijft; hij kijkt vanzelf opnieuw.",
        ),
        banned_title: s("Je hebt geen toegang"),
        banned_message: s("De beheerders van de website hebben je bezoek beëindigd."),
        refused_title: s("We kunnen je niet binnenlaten"),
        refused_message: s(
            "Deze website laat nu geen bezoekers toe vanaf jouw netwerk of software. Gebruik je \
             een gewone browser, probeer het dan opnieuw vanaf een ander netwerk (geen vpn of \
             netwerk van een hostingprovider).",
        ),
        full_title: s("De wachtrij is vol"),
        full_message: s(
            "Er wachten zoveel mensen dat de wachtrij vol is. Deze pagina probeert het zo vanzelf \
             opnieuw.",
        ),
        unavailable_title: s("Probeer het zo opnieuw"),
        unavailable_message: s(
            "De wachtruimte is nu niet bereikbaar. Deze pagina probeert het vanzelf opnieuw.",
        ),
        busy_title: s("Erg druk op dit moment"),
        busy_message: s("Het is erg druk in de wachtruimte. Deze pagina probeert het zo opnieuw."),
        limited_title: s("Te veel verzoeken"),
        limited_message: s(
            "Je verbinding heeft meer verzoeken verstuurd dan de wachtruimte toestaat. Deze pagina \
             probeert het zo vanzelf opnieuw.",
        ),
        challenge_title: s("Je browser wordt gecontroleerd"),
        challenge_message: s(
            "Voordat je in de wachtrij komt, lost je browser een kleine puzzel op die voorkomt dat \
             bots plekken innemen. Dit duurt een paar seconden; laat deze pagina open.",
        ),
        challenge_unsupported: s(
            "Je browser kan deze controle hier niet uitvoeren: daarvoor zijn JavaScript en een \
             beveiligde verbinding (https) nodig.",
        ),
        try_again: s("Nu opnieuw proberen"),
        thousands_separator: s("."),
        grouping_from: 1_000,
        digits: s("0123456789"),
        dir: s("ltr"),
        scheduled_title: s("De verkoop begint binnenkort"),
        scheduled_message: s(
            "Je bent aangemeld. Bij de opening krijgt iedereen die zich vooraf heeft aangemeld een \
             plek in de wachtrij, in willekeurige volgorde. Vroeg komen geeft dus geen voordeel en \
             herladen verandert niets. Laat deze pagina open: hij sluit vanzelf aan in de wachtrij.",
        ),
        scheduled_countdown: s("Begint over {time}"),
    }
}
