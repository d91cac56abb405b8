//! Italian (`it`): the default pages' texts.

use crate::response::Texts;

/// The texts in Italian.
pub(super) fn texts() -> Texts {
    let s = |s: &str| s.to_owned();
    Texts {
        lang: s("it"),
        eyebrow: s("Sala d’attesa"),
        waiting_title: s("Sei in coda"),
        position: s("Sei il numero {position} in coda"),
        ahead_label: s("Davanti a te"),
        waiting_label: s("In coda"),
        eta_label: s("Attesa stimata"),
        eta_almost_there: s("Ci sei quasi"),
        eta_minutes: s("Circa {minutes} min"),
        eta_hours: s("Circa {hours} h {minutes} min"),
        eta_unknown: s("Sconosciuta: da qualche minuto non è stato fatto entrare nessuno"),
        auto_update: s(
            "Questa pagina si aggiorna da sola. Tienila aperta: quando sarà il tuo turno, ti farà \
             entrare.",
        ),
        error: s(
            "one:Impossibile raggiungere la sala d’attesa. Nuovo tentativo tra {seconds} secondo.\
             |other:Impossibile raggiungere la sala d’attesa. Nuovo tentativo tra {seconds} \
             secondi.",
        ),
        letting_in: s("È il tuo turno. Ti stiamo facendo entrare\u{2026}"),
        leave_button: s("Esci dalla coda"),
        left_title: s("Hai lasciato la coda"),
        left_message: s("Il tuo posto è stato liberato, quindi la coda va avanti senza di te."),
        back_to_site: s("Torna al sito"),
        gone_title: s("Non sei più in coda"),
        gone_message: s(
            "Il tuo posto è stato liberato (forse in un’altra scheda) oppure è scaduto.",
        ),
        rejoin: s("Rimettiti in coda"),
        eta_estimating: s("Stima in corso\u{2026}"),
        eta_range: s("{low}–{high} min"),
        eta_paused: s("In pausa: la coda ripartirà a breve"),
        closed_title: s("La vendita è chiusa"),
        closed_message: s(
            "La vendita non è aperta in questo momento. Se eri in coda, mantieni il tuo posto \
             finché questa pagina resta aperta; ricontrollerà da sola.",
        ),
        banned_title: s("Non puoi entrare"),
        banned_message: s("I gestori del sito hanno terminato la tua visita."),
        refused_title: s("Non possiamo farti entrare"),
        refused_message: s(
            "Al momento questo sito non accetta visitatori dalla tua rete o dal tuo software. Se \
             usi un normale browser, riprova da un’altra rete (non una VPN né quella di un \
             provider di hosting).",
        ),
        full_title: s("La coda è piena"),
        full_message: s(
            "Ci sono così tante persone in attesa che la coda è piena. Questa pagina riproverà da \
             sola tra un momento.",
        ),
        unavailable_title: s("Riprova tra poco"),
        unavailable_message: s(
            "Al momento la sala d’attesa non è raggiungibile. Questa pagina riproverà da sola.",
        ),
        busy_title: s("Molto traffico in questo momento"),
        busy_message: s(
            "La sala d’attesa è molto affollata. Questa pagina riproverà tra un momento.",
        ),
        limited_title: s("Troppe richieste"),
        limited_message: s(
            "La tua connessione ha inviato più richieste di quante ne consenta la sala d’attesa. \
             Questa pagina riproverà da sola tra un momento.",
        ),
        challenge_title: s("Verifica del browser in corso"),
        challenge_message: s(
            "Prima che tu entri in coda, il tuo browser risolve un piccolo enigma che impedisce ai \
             bot di prendere i posti. Servono pochi secondi; tieni aperta questa pagina.",
        ),
        challenge_unsupported: s(
            "Il tuo browser non può eseguire questa verifica qui: servono JavaScript e una \
             connessione sicura (https).",
        ),
        try_again: s("Riprova ora"),
        thousands_separator: s("."),
        grouping_from: 10_000,
        digits: s("0123456789"),
        dir: s("ltr"),
        scheduled_title: s("La vendita apre a breve"),
        scheduled_message: s(
            "Registrazione effettuata. All’apertura, chi si è registrato prima riceve un posto in \
             coda in ordine casuale, quindi arrivare presto non dà alcun vantaggio e ricaricare \
             non cambia nulla. Tieni aperta questa pagina: entrerà in coda da sola.",
        ),
        scheduled_countdown: s("Apre tra {time}"),
    }
}
