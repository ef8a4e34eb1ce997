use tep_dataplane::config::Config;
#[test]
fn probe() {
    for t in [
        "[[tunnel]]\nname='g'\nkind='geneve'\nlocal='192.0.2.1'\nremote='192.0.2.2'\nvni = 99999999999999999999\n",
        "tunnel = [1]\n",
        "dataplane = 5\n",
        "[dataplane]\nrestart_counter = 1.5\n",
        "[[tunnel]]\nname='g'\n[tunnel.sub]\nx=1\n",
        "[[tunnel]]\nname='g'\nfoo.bar=1\n",
        "x = \n",
        "[[tunnel]]\nname = 'g'\ninner_macs = [1]\n",
        "[[tunnel]]\nname = 'g'\nkind = 'gtpu'\nlocal='::1'\nremote='::2'\nteid=1\ninner_prefixes=['10.0.0.0/8', 5]\n",
    ] {
        match Config::parse(t) { Ok(_) => println!("OK"), Err(e) => println!("{e}  [field={:?}]", e.field) }
    }
}
