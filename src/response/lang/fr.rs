//! French (`fr`): the default pages' texts.

use crate::response::Texts;

/// The texts in French.
pub(super) fn texts() -> Texts {
    let s = |s: &str| s.to_owned();
    Texts {
        lang: s("fr"),
        eyebrow: s("Salle d’attente"),
        waiting_title: s("Vous êtes dans la file d’attente"),
        position: s("Vous êtes numéro {position} dans la file d’attente"),
        ahead_label: s("Devant vous"),
        waiting_label: s("Dans la file"),
        eta_label: s("Attente estimée"),
        eta_almost_there: s("Vous y êtes presque"),
        eta_minutes: s("Environ {minutes} min"),
        eta_hours: s("Environ {hours} h {minutes} min"),
        eta_unknown: s("Inconnue\u{202f}: personne n’a été admis depuis quelques minutes"),
        auto_update: s(
            "Cette page se met à jour d’elle-même. Gardez-la ouverte\u{202f}: quand ce sera votre \
             tour, elle vous fera entrer.",
        ),
        error: s(
            "one:Impossible de joindre la salle d’attente. Nouvel essai dans {seconds} seconde.\
             |other:Impossible de joindre la salle d’attente. Nouvel essai dans {seconds} secondes.",
        ),
        letting_in: s("C’est votre tour. Entrée en cours\u{2026}"),
        leave_button: s("Quitter la file d’attente"),
        left_title: s("Vous avez quitté la file d’attente"),
        left_message: s("Votre place a été libérée, la file d’attente avance donc sans vous."),
        back_to_site: s("Retour au site"),
        gone_title: s("Vous n’êtes plus dans la file d’attente"),
        gone_message: s("Votre place a été libérée (peut-être dans un autre onglet) ou a expiré."),
        rejoin: s("Rejoindre à nouveau la file d’attente"),
        eta_estimating: s("Estimation en cours\u{2026}"),
        eta_range: s("{low}–{high} min"),
        eta_paused: s("En pause\u{202f}: la file d’attente repart bientôt"),
        closed_title: s("La vente est fermée"),
        closed_message: s(
            "La vente n’est pas ouverte pour le moment. Si vous étiez dans la file d’attente, vous \
             gardez votre place tant que cette page reste ouverte\u{202f}; elle revérifie \
             d’elle-même.",
        ),
        banned_title: s("Vous ne pouvez pas entrer"),
        banned_message: s("Les responsables du site ont mis fin à votre visite."),
        refused_title: s("Nous ne pouvons pas vous laisser entrer"),
        refused_message: s(
            "Ce site n’accepte pas les visiteurs de votre réseau ou de votre logiciel pour le \
             moment. Si vous utilisez un navigateur ordinaire, réessayez depuis un autre réseau \
             (ni un VPN ni celui d’un hébergeur).",
        ),
        full_title: s("La file d’attente est complète"),
        full_message: s(
            "Tant de personnes attendent que la file d’attente est complète. Cette page réessaie \
             d’elle-même dans un instant.",
        ),
        unavailable_title: s("Veuillez réessayer bientôt"),
        unavailable_message: s(
            "La salle d’attente est injoignable pour le moment. Cette page réessaie d’elle-même.",
        ),
        busy_title: s("Très forte affluence"),
        busy_message: s(
            "La salle d’attente est très sollicitée. Cette page réessaie dans un instant.",
        ),
        limited_title: s("Trop de requêtes"),
        limited_message: s(
            "Votre connexion a envoyé plus de requêtes que la salle d’attente n’en autorise. Cette \
             page réessaie d’elle-même dans un instant.",
        ),
        challenge_title: s("Vérification de votre navigateur"),
        challenge_message: s(
            "Avant que vous ne rejoigniez la file d’attente, votre navigateur résout une petite \
             énigme qui empêche les robots de prendre des places. Cela prend quelques \
             secondes\u{202f}; gardez cette page ouverte.",
        ),
        challenge_unsupported: s(
            "Votre navigateur ne peut pas effectuer cette vérification ici\u{202f}: il lui faut \
             JavaScript et une connexion sécurisée (https).",
        ),
        try_again: s("Réessayer maintenant"),
        thousands_separator: s("\u{202f}"),
        grouping_from: 1_000,
        digits: s("0123456789"),
        dir: s("ltr"),
        scheduled_title: s("La vente ouvre bientôt"),
        scheduled_message: s(
            "Votre inscription est enregistrée. À l’ouverture, toutes les personnes inscrites \
             avant reçoivent une place dans la file d’attente dans un ordre aléatoire, donc \
             arriver tôt ne donne aucun avantage et recharger la page ne change rien. Gardez cette \
             page ouverte\u{202f}: elle rejoint la file d’attente d’elle-même.",
        ),
        scheduled_countdown: s("Ouverture dans {time}"),
    }
}
