//! Simplified Chinese (mainland China) (`zh-CN`): the default pages' texts.

use crate::response::Texts;

/// The texts in Simplified Chinese (mainland China).
pub(super) fn texts() -> Texts {
    let s = |s: &str| s.to_owned();
    Texts {
        lang: s("zh-CN"),
        eyebrow: s("等候室"),
        waiting_title: s("您正在排队"),
        position: s("您排在第{position}位"),
        ahead_label: s("前方人数"),
        waiting_label: s("排队人数"),
        eta_label: s("预计等待时间"),
        eta_almost_there: s("马上就轮到您了"),
        eta_minutes: s("约{minutes}分钟"),
        eta_hours: s("约{hours}小时{minutes}分钟"),
        eta_unknown: s("未知：最近几分钟没有人获准进入"),
        auto_update: s("本页面会自动更新。请保持页面打开：轮到您时，页面会自动带您进入。"),
        error: s("无法连接等候室，将在{seconds}秒后重试。"),
        letting_in: s("轮到您了，正在进入\u{2026}\u{2026}"),
        leave_button: s("退出队列"),
        left_title: s("您已退出队列"),
        left_message: s("您的位置已被放弃，队列将在没有您的情况下继续前进。"),
        back_to_site: s("返回网站"),
        gone_title: s("您已不在队列中"),
        gone_message: s("您的位置已被放弃（可能是在其他标签页中）或已过期。"),
        rejoin: s("重新加入队列"),
        eta_estimating: s("正在估算\u{2026}\u{2026}"),
        eta_range: s("{low}–{high}分钟"),
        eta_paused: s("已暂停：队列很快会继续前进"),
        closed_title: s("销售已关闭"),
        closed_message: s(
            "目前未开放销售。如果您之前在排队，只要本页面保持打开，您的位置就会保留；\
             页面会自动再次检查。",
        ),
        banned_title: s("您无法进入"),
        banned_message: s("网站运营方已结束您的访问。"),
        refused_title: s("我们无法让您进入"),
        refused_message: s(
            "本网站目前不接受来自您的网络或软件的访问。如果您使用的是普通浏览器，\
             请换用其他网络再试（不要使用VPN或托管服务商的网络）。",
        ),
        full_title: s("队列已满"),
        full_message: s("等候的人太多，队列已满。本页面稍后会自动重试。"),
        unavailable_title: s("请稍后再试"),
        unavailable_message: s("目前无法连接等候室。本页面会自动重试。"),
        busy_title: s("当前访问人数过多"),
        busy_message: s("等候室非常繁忙。本页面稍后会重试。"),
        limited_title: s("请求过多"),
        limited_message: s("您的连接发送的请求超出了等候室允许的数量。本页面稍后会自动重试。"),
        challenge_title: s("正在检查您的浏览器"),
        challenge_message: s(
            "在您加入队列之前，您的浏览器会解一道小谜题，以防机器人抢占位置。这需要几秒钟，\
             请保持本页面打开。",
        ),
        challenge_unsupported: s(
            "您的浏览器无法在此完成这项检查：需要JavaScript和安全（https）连接。",
        ),
        try_again: s("立即重试"),
        thousands_separator: s(","),
        grouping_from: 1_000,
        digits: s("0123456789"),
        dir: s("ltr"),
        scheduled_title: s("销售即将开始"),
        scheduled_message: s(
            "您已完成登记。开始时，所有此前登记的人将按随机顺序获得队列中的位置，因此早到没有优势，\
             刷新也不会改变任何结果。请保持本页面打开：页面会自动帮您加入队列。",
        ),
        scheduled_countdown: s("{time}后开始"),
    }
}
