//! Korean (`ko`): the default pages' texts.

use crate::response::Texts;

/// The texts in Korean.
pub(super) fn texts() -> Texts {
    let s = |s: &str| s.to_owned();
    Texts {
        lang: s("ko"),
        eyebrow: s("대기실"),
        waiting_title: s("대기 중입니다"),
        position: s("현재 대기 순번은 {position}번입니다"),
        ahead_label: s("내 앞 대기자"),
        waiting_label: s("전체 대기자"),
        eta_label: s("예상 대기 시간"),
        eta_almost_there: s("곧 입장합니다"),
        eta_minutes: s("약 {minutes}분"),
        eta_hours: s("약 {hours}시간 {minutes}분"),
        eta_unknown: s("알 수 없음: 몇 분 동안 입장한 사람이 없습니다"),
        auto_update: s(
            "이 페이지는 자동으로 업데이트됩니다. 페이지를 열어 두세요. 차례가 되면 자동으로 \
             입장합니다.",
        ),
        error: s("대기실에 연결할 수 없습니다. {seconds}초 후 다시 시도합니다."),
        letting_in: s("차례가 되었습니다. 입장 중입니다\u{2026}"),
        leave_button: s("대기열 나가기"),
        left_title: s("대기열에서 나왔습니다"),
        left_message: s("자리가 반환되어 대기열은 고객님 없이 진행됩니다."),
        back_to_site: s("사이트로 돌아가기"),
        gone_title: s("더 이상 대기열에 없습니다"),
        gone_message: s("자리가 반환되었거나(다른 탭에서 반환되었을 수 있습니다) 만료되었습니다."),
        rejoin: s("대기열에 다시 들어가기"),
        eta_estimating: s("계산 중\u{2026}"),
        eta_range: s("{low}~{high}분"),
        eta_paused: s("일시 중지됨: 곧 대기열이 다시 움직입니다"),
        closed_title: s("판매 시간이 아닙니다"),
        closed_message: s(
            "지금은 판매가 열려 있지 않습니다. 대기열에 있었다면 이 페이지를 열어 두는 동안 자리가 \
             유지되며, 페이지가 자동으로 다시 확인합니다.",
        ),
        banned_title: s("입장할 수 없습니다"),
        banned_message: s("사이트 운영자가 방문을 종료했습니다."),
        refused_title: s("입장을 허용할 수 없습니다"),
        refused_message: s(
            "현재 이 사이트는 고객님의 네트워크나 소프트웨어에서의 방문을 받지 않습니다. 일반 \
             브라우저를 사용 중이라면 다른 네트워크(VPN이나 호스팅 업체의 네트워크 제외)에서 다시 \
             시도해 주세요.",
        ),
        full_title: s("대기열이 가득 찼습니다"),
        full_message: s(
            "대기 인원이 너무 많아 대기열이 가득 찼습니다. 이 페이지가 잠시 후 자동으로 다시 \
             시도합니다.",
        ),
        unavailable_title: s("잠시 후 다시 시도해 주세요"),
        unavailable_message: s(
            "지금은 대기실에 연결할 수 없습니다. 이 페이지가 자동으로 다시 시도합니다.",
        ),
        busy_title: s("현재 접속자가 매우 많습니다"),
        busy_message: s("대기실이 매우 혼잡합니다. 이 페이지가 잠시 후 다시 시도합니다."),
        limited_title: s("요청이 너무 많습니다"),
        limited_message: s(
            "고객님의 연결에서 대기실 허용 한도보다 많은 요청을 보냈습니다. 이 페이지가 잠시 후 \
             자동으로 다시 시도합니다.",
        ),
        challenge_title: s("브라우저 확인 중"),
        challenge_message: s(
            "대기열에 들어가기 전에, 봇이 자리를 차지하지 못하도록 브라우저가 작은 퍼즐을 풉니다. \
             몇 초 정도 걸리니 이 페이지를 열어 두세요.",
        ),
        challenge_unsupported: s(
            "사용 중인 브라우저는 여기서 이 확인을 할 수 없습니다. JavaScript와 보안(https) 연결이 \
             필요합니다.",
        ),
        try_again: s("지금 다시 시도"),
        thousands_separator: s(","),
        grouping_from: 1_000,
        digits: s("0123456789"),
        dir: s("ltr"),
        scheduled_title: s("곧 판매가 시작됩니다"),
        scheduled_message: s(
            "등록이 완료되었습니다. 판매가 시작되면 그 전에 등록한 모든 분이 무작위 순서로 \
             대기열에 자리를 받으므로, 일찍 와도 유리하지 않고 새로고침해도 달라지지 않습니다. 이 \
             페이지를 열어 두세요. 자동으로 대기열에 들어갑니다.",
        ),
        scheduled_countdown: s("{time} 후 시작"),
    }
}
