//! Traditional Chinese (Taiwan) (`zh-TW`): the default pages' texts.

use crate::response::Texts;

/// The texts in Traditional Chinese (Taiwan).
pub(super) fn texts() -> Texts {
    let s = |s: &str| s.to_owned();
    Texts {
        lang: s("zh-TW"),
        eyebrow: s("等候室"),
        waiting_title: s("您正在排隊"),
        position: s("您目前排在第 {position} 位"),
        ahead_label: s("前方人數"),
        waiting_label: s("排隊人數"),
        eta_label: s("預估等候時間"),
        eta_almost_there: s("快輪到您了"),
        eta_minutes: s("約 {minutes} 分鐘"),
        eta_hours: s("約 {hours} 小時 {minutes} 分鐘"),
        eta_unknown: s("未知：最近幾分鐘沒有人獲准進入"),
        auto_update: s("本頁會自動更新。請保持開啟：輪到您時，本頁會自動帶您進入。"),
        error: s("無法連線至等候室，將於 {seconds} 秒後重試。"),
        letting_in: s("輪到您了，正在進入\u{2026}\u{2026}"),
        leave_button: s("離開隊伍"),
        left_title: s("您已離開隊伍"),
        left_message: s("您的位置已釋出，隊伍將在沒有您的情況下繼續前進。"),
        back_to_site: s("返回網站"),
        gone_title: s("您已不在隊伍中"),
        gone_message: s("您的位置已釋出（可能是在其他分頁中）或已過期。"),
        rejoin: s("重新加入隊伍"),
        eta_estimating: s("正在估算\u{2026}\u{2026}"),
        eta_range: s("{low}–{high} 分鐘"),
        eta_paused: s("已暫停：隊伍很快會繼續前進"),
        closed_title: s("販售已關閉"),
        closed_message: s(
            "目前未開放販售。若您原本在排隊，只要本頁保持開啟，您的位置就會保留；\
             本頁會自動再次確認。",
        ),
        banned_title: s("您無法進入"),
        banned_message: s("網站管理者已結束您的造訪。"),
        refused_title: s("我們無法讓您進入"),
        refused_message: s(
            "本網站目前不接受來自您的網路或軟體的造訪。如果您使用的是一般瀏覽器，\
             請改用其他網路再試一次（不要使用 VPN 或主機服務商的網路）。",
        ),
        full_title: s("隊伍已滿"),
        full_message: s("等候人數過多，隊伍已滿。本頁稍後會自動重試。"),
        unavailable_title: s("請稍後再試"),
        unavailable_message: s("目前無法連線至等候室。本頁會自動重試。"),
        busy_title: s("目前人潮眾多"),
        busy_message: s("等候室目前非常繁忙。本頁稍後會重試。"),
        limited_title: s("請求次數過多"),
        limited_message: s("您的連線送出的請求超過等候室允許的數量。本頁稍後會自動重試。"),
        challenge_title: s("正在檢查您的瀏覽器"),
        challenge_message: s(
            "在您加入隊伍前，您的瀏覽器會解一道小謎題，以防止機器人占用位置。這需要幾秒鐘，\
             請保持本頁開啟。",
        ),
        challenge_unsupported: s(
            "您的瀏覽器無法在此進行這項檢查：需要 JavaScript 和安全（https）連線。",
        ),
        try_again: s("立即重試"),
        thousands_separator: s(","),
        grouping_from: 1_000,
        digits: s("0123456789"),
        dir: s("ltr"),
        scheduled_title: s("販售即將開始"),
        scheduled_message: s(
            "您已完成登記。開賣時，所有事先登記的人會依隨機順序取得隊伍中的位置，\
             因此提早到沒有優勢，重新整理也不會改變任何結果。請保持本頁開啟：\
             本頁會自動幫您加入隊伍。",
        ),
        scheduled_countdown: s("{time} 後開始"),
    }
}
