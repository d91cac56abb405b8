//! Polish (`pl`): the default pages' texts.

use crate::response::Texts;

/// The texts in Polish.
pub(super) fn texts() -> Texts {
    let s = |s: &str| s.to_owned();
    Texts {
        lang: s("pl"),
        eyebrow: s("Poczekalnia"),
        waiting_title: s("Jesteś w kolejce"),
        position: s("Jesteś numerem {position} w kolejce"),
        ahead_label: s("Przed Tobą"),
        waiting_label: s("W kolejce"),
        eta_label: s("Szacowany czas oczekiwania"),
        eta_almost_there: s("Już prawie"),
        eta_minutes: s("one:Około {minutes} minuty\
             |few:Około {minutes} minut\
             |many:Około {minutes} minut\
             |other:Około {minutes} minuty"),
        eta_hours: s("Około {hours} godz. {minutes} min"),
        eta_unknown: s("Nieznany: od kilku minut nikt nie został wpuszczony"),
        auto_update: s(
            "Ta strona odświeża się sama. Nie zamykaj jej: gdy przyjdzie Twoja kolej, sama Cię \
             wpuści.",
        ),
        error: s(
            "one:Brak połączenia z poczekalnią. Ponowna próba za {seconds} sekundę.\
             |few:Brak połączenia z poczekalnią. Ponowna próba za {seconds} sekundy.\
             |many:Brak połączenia z poczekalnią. Ponowna próba za {seconds} sekund.\
             |other:Brak połączenia z poczekalnią. Ponowna próba za {seconds} sekundy.",
        ),
        letting_in: s("Twoja kolej. Wpuszczamy Cię\u{2026}"),
        leave_button: s("Opuść kolejkę"),
        left_title: s("Opuszczono kolejkę"),
        left_message: s(
            "Twoje miejsce zostało zwolnione, więc kolejka przesuwa się dalej bez Ciebie.",
        ),
        back_to_site: s("Wróć do serwisu"),
        gone_title: s("Nie jesteś już w kolejce"),
        gone_message: s("Twoje miejsce zostało zwolnione (być może w innej karcie) lub wygasło."),
        rejoin: s("Dołącz ponownie do kolejki"),
        eta_estimating: s("Szacowanie\u{2026}"),
        eta_range: s("one:{low}–{high} minuty\
             |few:{low}–{high} minuty\
             |many:{low}–{high} minut\
             |other:{low}–{high} minuty"),
        eta_paused: s("Wstrzymano: kolejka wkrótce znów ruszy"),
        closed_title: s("Sprzedaż jest zamknięta"),
        closed_message: s(
            "Sprzedaż nie jest teraz otwarta. Jeśli masz miejsce w kolejce, zachowasz je, dopóki \
             ta strona jest otwarta; sama sprawdzi ponownie.",
        ),
        banned_title: s("Nie możesz wejść"),
        banned_message: s("Administratorzy serwisu zakończyli Twoją wizytę."),
        refused_title: s("Nie możemy Cię wpuścić"),
        refused_message: s(
            "Ten serwis nie przyjmuje teraz odwiedzających z Twojej sieci lub z Twojego \
             oprogramowania. Jeśli używasz zwykłej przeglądarki, spróbuj ponownie z innej sieci \
             (nie przez VPN ani sieć dostawcy hostingu).",
        ),
        full_title: s("Kolejka jest pełna"),
        full_message: s(
            "Czeka tak wiele osób, że kolejka jest pełna. Ta strona za chwilę sama spróbuje \
             ponownie.",
        ),
        unavailable_title: s("Spróbuj ponownie za chwilę"),
        unavailable_message: s(
            "Poczekalnia jest teraz niedostępna. Ta strona sama spróbuje ponownie.",
        ),
        busy_title: s("Bardzo duży ruch"),
        busy_message: s(
            "Poczekalnia jest bardzo obciążona. Ta strona za chwilę spróbuje ponownie.",
        ),
        limited_title: s("Zbyt wiele żądań"),
        limited_message: s(
            "Twoje połączenie wysłało więcej żądań, niż pozwala poczekalnia. Ta strona za chwilę \
             sama spróbuje ponownie.",
        ),
        challenge_title: s("Sprawdzanie przeglądarki"),
        challenge_message: s(
            "Zanim dołączysz do kolejki, Twoja przeglądarka rozwiąże małą zagadkę, która nie \
             pozwala botom zajmować miejsc. To potrwa kilka sekund; nie zamykaj tej strony.",
        ),
        challenge_unsupported: s(
            "Twoja przeglądarka nie może tu przeprowadzić tej kontroli: potrzebuje JavaScriptu i \
             bezpiecznego połączenia (https).",
        ),
        try_again: s("Spróbuj ponownie teraz"),
        thousands_separator: s("\u{a0}"),
        grouping_from: 10_000,
        digits: s("0123456789"),
        dir: s("ltr"),
        scheduled_title: s("Sprzedaż wkrótce się rozpocznie"),
        scheduled_message: s(
            "Zapisano Cię. W chwili otwarcia wszyscy zapisani wcześniej otrzymają miejsce w \
             kolejce w losowym porządku, więc wcześniejsze przybycie nie daje przewagi, a \
             odświeżanie niczego nie zmienia. Nie zamykaj tej strony: sama dołączy do kolejki.",
        ),
        scheduled_countdown: s("Otwarcie za {time}"),
    }
}
