//! Brazilian Portuguese (`pt-BR`): the default pages' texts.

use crate::response::Texts;

/// The texts in Brazilian Portuguese.
pub(super) fn texts() -> Texts {
    let s = |s: &str| s.to_owned();
    Texts {
        lang: s("pt-BR"),
        eyebrow: s("Sala de espera"),
        waiting_title: s("Você está na fila"),
        position: s("Você é o número {position} na fila"),
        ahead_label: s("À sua frente"),
        waiting_label: s("Na fila"),
        eta_label: s("Espera estimada"),
        eta_almost_there: s("Quase lá"),
        eta_minutes: s("Cerca de {minutes} min"),
        eta_hours: s("Cerca de {hours} h {minutes} min"),
        eta_unknown: s("Desconhecida: ninguém foi liberado nos últimos minutos"),
        auto_update: s(
            "Esta página se atualiza sozinha. Mantenha-a aberta: quando chegar a sua vez, ela \
             deixará você entrar.",
        ),
        error: s(
            "one:Não foi possível acessar a sala de espera. Nova tentativa em {seconds} segundo.\
             |other:Não foi possível acessar a sala de espera. Nova tentativa em {seconds} \
             segundos.",
        ),
        letting_in: s("É a sua vez. Entrando\u{2026}"),
        leave_button: s("Sair da fila"),
        left_title: s("Você saiu da fila"),
        left_message: s("Seu lugar foi liberado, então a fila segue sem você."),
        back_to_site: s("Voltar ao site"),
        gone_title: s("Você não está mais na fila"),
        gone_message: s("Seu lugar foi liberado (talvez em outra aba) ou expirou."),
        rejoin: s("Entrar na fila de novo"),
        eta_estimating: s("Calculando\u{2026}"),
        eta_range: s("{low}–{high} min"),
        eta_paused: s("Em pausa: a fila volta a andar em breve"),
        closed_title: s("A venda está fechada"),
        closed_message: s(
            "A venda não está aberta no momento. Se você estava na fila, mantém seu lugar enquanto \
             esta página ficar aberta; ela verifica de novo sozinha.",
        ),
        banned_title: s("Você não pode entrar"),
        banned_message: s("Os responsáveis pelo site encerraram sua visita."),
        refused_title: s("Não podemos deixar você entrar"),
        refused_message: s(
            "No momento, este site não aceita visitantes da sua rede ou do seu software. Se você \
             usa um navegador comum, tente de novo em outra rede (que não seja uma VPN nem a de um \
             provedor de hospedagem).",
        ),
        full_title: s("A fila está cheia"),
        full_message: s(
            "Há tantas pessoas esperando que a fila está cheia. Esta página tenta de novo sozinha \
             em instantes.",
        ),
        unavailable_title: s("Tente de novo em breve"),
        unavailable_message: s(
            "Não é possível acessar a sala de espera agora. Esta página tenta de novo sozinha.",
        ),
        busy_title: s("Muito movimento agora"),
        busy_message: s(
            "A sala de espera está muito movimentada. Esta página tenta de novo em instantes.",
        ),
        limited_title: s("Muitas solicitações"),
        limited_message: s(
            "Sua conexão enviou mais solicitações do que a sala de espera permite. Esta página \
             tenta de novo sozinha em instantes.",
        ),
        challenge_title: s("Verificando seu navegador"),
        challenge_message: s(
            "Antes de você entrar na fila, seu navegador resolve um pequeno desafio que impede \
             robôs de ocupar lugares. Isso leva alguns segundos; mantenha esta página aberta.",
        ),
        challenge_unsupported: s(
            "Seu navegador não consegue fazer esta verificação aqui: ele precisa de JavaScript e \
             de uma conexão segura (https).",
        ),
        try_again: s("Tentar de novo agora"),
        thousands_separator: s("."),
        grouping_from: 1_000,
        digits: s("0123456789"),
        dir: s("ltr"),
        scheduled_title: s("A venda abre em breve"),
        scheduled_message: s(
            "Sua inscrição está confirmada. Na abertura, todos que se inscreveram antes recebem um \
             lugar na fila em ordem aleatória, então chegar cedo não dá vantagem e recarregar não \
             muda nada. Mantenha esta página aberta: ela entra na fila sozinha.",
        ),
        scheduled_countdown: s("Abre em {time}"),
    }
}
