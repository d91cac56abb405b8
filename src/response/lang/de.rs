//! German (`de`): the default pages' texts.

use crate::response::Texts;

/// The texts in German.
pub(super) fn texts() -> Texts {
    let s = |s: &str| s.to_owned();
    Texts {
        lang: s("de"),
        eyebrow: s("Warteraum"),
        waiting_title: s("Sie sind in der Warteschlange"),
        position: s("Sie sind Nummer {position} in der Warteschlange"),
        ahead_label: s("Vor Ihnen"),
        waiting_label: s("In der Warteschlange"),
        eta_label: s("Geschätzte Wartezeit"),
        eta_almost_there: s("Fast geschafft"),
        eta_minutes: s("Etwa {minutes} Min."),
        eta_hours: s("Etwa {hours} Std. {minutes} Min."),
        eta_unknown: s("Unbekannt: Seit einigen Minuten wurde niemand eingelassen"),
        auto_update: s(
            "Diese Seite aktualisiert sich von selbst. Lassen Sie sie geöffnet: Wenn Sie an der \
             Reihe sind, lässt sie Sie ein.",
        ),
        error: s(
            "one:Der Warteraum ist nicht erreichbar. Neuer Versuch in {seconds} Sekunde.\
             |other:Der Warteraum ist nicht erreichbar. Neuer Versuch in {seconds} Sekunden.",
        ),
        letting_in: s("Sie sind an der Reihe. Sie werden eingelassen\u{2026}"),
        leave_button: s("Warteschlange verlassen"),
        left_title: s("Sie haben die Warteschlange verlassen"),
        left_message: s(
            "Ihr Platz wurde aufgegeben, die Warteschlange rückt also ohne Sie weiter.",
        ),
        back_to_site: s("Zurück zur Website"),
        gone_title: s("Sie sind nicht mehr in der Warteschlange"),
        gone_message: s(
            "Ihr Platz wurde aufgegeben (vielleicht in einem anderen Tab) oder ist abgelaufen.",
        ),
        rejoin: s("Erneut anstellen"),
        eta_estimating: s("Wird geschätzt\u{2026}"),
        eta_range: s("{low}–{high} Min."),
        eta_paused: s("Pausiert: Die Warteschlange rückt bald weiter"),
        closed_title: s("Der Verkauf ist geschlossen"),
        closed_message: s(
            "Der Verkauf ist gerade nicht geöffnet. Wenn Sie in der Warteschlange waren, behalten \
             Sie Ihren Platz, solange diese Seite geöffnet bleibt; sie prüft von selbst erneut.",
        ),
        banned_title: s("Kein Zutritt"),
        banned_message: s("Die Betreiber der Website haben Ihren Besuch beendet."),
        refused_title: s("Wir können Sie nicht einlassen"),
        refused_message: s(
            "Diese Website nimmt derzeit keine Besucher aus Ihrem Netzwerk oder mit Ihrer Software \
             an. Wenn Sie einen gewöhnlichen Browser nutzen, versuchen Sie es aus einem anderen \
             Netzwerk erneut (nicht über ein VPN oder einen Hosting-Anbieter).",
        ),
        full_title: s("Die Warteschlange ist voll"),
        full_message: s(
            "Es warten so viele Menschen, dass die Warteschlange voll ist. Diese Seite versucht es \
             gleich von selbst erneut.",
        ),
        unavailable_title: s("Bitte versuchen Sie es gleich erneut"),
        unavailable_message: s(
            "Der Warteraum ist gerade nicht erreichbar. Diese Seite versucht es von selbst erneut.",
        ),
        busy_title: s("Gerade sehr großer Andrang"),
        busy_message: s(
            "Der Warteraum ist stark ausgelastet. Diese Seite versucht es gleich erneut.",
        ),
        limited_title: s("Zu viele Anfragen"),
        limited_message: s(
            "Ihre Verbindung hat mehr Anfragen gesendet, als der Warteraum erlaubt. Diese Seite \
             versucht es gleich von selbst erneut.",
        ),
        challenge_title: s("Ihr Browser wird geprüft"),
        challenge_message: s(
            "Bevor Sie sich anstellen, löst Ihr Browser ein kleines Rätsel, das Bots davon abhält, \
             Plätze zu belegen. Das dauert einige Sekunden; lassen Sie diese Seite geöffnet.",
        ),
        challenge_unsupported: s(
            "Ihr Browser kann diese Prüfung hier nicht durchführen: Er braucht JavaScript und eine \
             sichere Verbindung (https).",
        ),
        try_again: s("Jetzt erneut versuchen"),
        thousands_separator: s("."),
        grouping_from: 1_000,
        digits: s("0123456789"),
        dir: s("ltr"),
        scheduled_title: s("Der Verkauf beginnt bald"),
        scheduled_message: s(
            "Sie sind registriert. Zum Start erhalten alle, die sich vorher registriert haben, \
             einen Platz in der Warteschlange in zufälliger Reihenfolge. Früh da zu sein bringt \
             also keinen Vorteil, und Neuladen ändert nichts. Lassen Sie diese Seite geöffnet, \
             dann stellt sie Sie von selbst an.",
        ),
        scheduled_countdown: s("Beginnt in {time}"),
    }
}
