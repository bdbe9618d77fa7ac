//! The `key=value` arguments of a DPDK device string (`net_af_packet0,iface=veth0,framesz=2048`),
//! read the same way for every kernel port (`af_packet`, `af_xdp`): keys and values trimmed,
//! the first occurrence of a key wins, anything without `=` ignored (as the EAL's kvargs do).

/// The arguments of one device string, borrowed from it.
#[derive(Debug, Clone)]
pub struct DeviceArgs<'a> {
    args: Vec<(&'a str, &'a str)>,
}

/// A numeric argument whose text is not a number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotANumber {
    /// Argument name.
    pub key: String,
    /// Its text.
    pub value: String,
}

impl<'a> DeviceArgs<'a> {
    /// The arguments after the driver name of `device`.
    pub fn parse(device: &'a str) -> Self {
        let args = device
            .trim()
            .split(',')
            .skip(1)
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (k.trim(), v.trim()))
            .collect();
        DeviceArgs { args }
    }

    /// The text of `key`, if given.
    pub fn text(&self, key: &str) -> Option<&'a str> {
        self.args.iter().find(|(k, _)| *k == key).map(|(_, v)| *v)
    }

    /// The value of `key` as a number, if given.
    pub fn number(&self, key: &str) -> Result<Option<u32>, NotANumber> {
        self.text(key)
            .map(|v| v.parse::<u32>().map_err(|_| NotANumber { key: key.to_owned(), value: v.to_owned() }))
            .transpose()
    }

    /// The kernel interface (`iface=`), if given and not empty.
    pub fn iface(&self) -> Option<&'a str> {
        self.text("iface").filter(|v| !v.is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_are_trimmed_first_wins_and_numbers_are_checked() {
        let a = DeviceArgs::parse(" net_af_xdp0, iface = v0 ,start_queue=2,flag,start_queue=3,n=x");
        assert_eq!(a.iface(), Some("v0"));
        assert_eq!(a.number("start_queue"), Ok(Some(2)));
        assert_eq!(a.number("queue_count"), Ok(None));
        assert_eq!(a.number("n"), Err(NotANumber { key: "n".into(), value: "x".into() }));
        assert_eq!(a.text("flag"), None);
        assert_eq!(DeviceArgs::parse("net_af_packet0,iface=").iface(), None);
    }
}
