"""A PaddleLikeJob's certificates: where its Pods find them, and the cert-manager
objects that issue them.

Every process of a job talks mutual TLS with a certificate of its role (its common
name: ``master``, ``trainer``, ``pserver-<i>``, or ``launch`` for an operator's tools),
signed by the job's own CA, with the DNS name ``paddle-like.job`` (k8s/README.md, "The
job's certificates"). Role *r* of job *J* reads the Secret ``J-tls-<r>`` (cert-manager's
layout: tls.crt, tls.key, ca.crt), mounted read-only, mode 0440.

With ``spec.tls.certificates: CertManager`` (the default) the operator creates, per job,
the cert-manager objects that make those Secrets: a self-signed Issuer, the job's CA
(a Certificate with isCA), an Issuer of that CA and one Certificate per role. Every job
has its own CA, so a certificate of one job is refused by every other. With
``Provided`` the Secrets are made by hand before the job starts (the README's openssl
commands); its Pods wait in ContainerCreating until they exist.

Pure: no API calls.
"""

__all__ = ["DNS_NAME", "TLS_DIR", "roles", "secret_name", "secret_volume", "pserver_tls_volume", "pserver_tls_dir",
           "cert_manager_objects", "CERT_MANAGER_KINDS"]

DNS_NAME = "paddle-like.job"   # what every process asks its peer's certificate for
TLS_DIR = "/etc/paddle-like/tls"
TLS_FILES = ("tls.crt", "tls.key", "ca.crt")
SECRET_MODE = 0o440  # root and the Pod's fsGroup (10001) read it, no one else
CERT_MANAGER = "cert-manager.io/v1"
CERT_MANAGER_KINDS = ("Issuer", "Certificate")
_KEY = {"algorithm": "ECDSA", "size": 256}


def roles(spec):
    """Every role of the job, one certificate each."""
    return ["master", "trainer", "launch"] + [f"pserver-{i}" for i in range(spec["pserver.shards"])]


def secret_name(spec, role):
    return f"{spec.name}-tls-{role}"


def secret_volume(spec, role):
    """The `tls` volume of a Pod of one role (master, trainer)."""
    return {"name": "tls", "secret": {"secretName": secret_name(spec, role), "defaultMode": SECRET_MODE}}


def pserver_tls_volume(spec):
    """The pservers' `tls` volume: one StatefulSet template serves every ordinal, so every
    Pod mounts each shard's certificate in its folder pserver-<i>/ and picks its own
    (pserver_tls_dir)."""
    sources = [{"secret": {"name": secret_name(spec, f"pserver-{i}"),
                           "items": [{"key": k, "path": f"pserver-{i}/{k}"} for k in TLS_FILES]}}
               for i in range(spec["pserver.shards"])]
    return {"name": "tls", "projected": {"defaultMode": SECRET_MODE, "sources": sources}}


def pserver_tls_dir(index_expression):
    """PL_TLS_DIR of the pserver whose index the shell expression gives."""
    return f"{TLS_DIR}/pserver-{index_expression}"


def _certificate(spec, name, body):
    return {"apiVersion": CERT_MANAGER, "kind": "Certificate", "metadata": spec.metadata(name),
            "spec": dict(body, privateKey=dict(_KEY))}


def cert_manager_objects(spec):
    """The Issuers and Certificates that make the job's Secrets (spec.tls.certificates:
    CertManager); [] otherwise."""
    if spec["tls.certificates"] != "CertManager":
        return []
    ca = f"{spec.name}-ca"
    self_signed = f"{spec.name}-selfsigned"
    objects = [
        {"apiVersion": CERT_MANAGER, "kind": "Issuer", "metadata": spec.metadata(self_signed),
         "spec": {"selfSigned": {}}},
        _certificate(spec, ca, {"isCA": True, "commonName": ca, "secretName": ca,
                                "issuerRef": {"name": self_signed, "kind": "Issuer"}}),
        {"apiVersion": CERT_MANAGER, "kind": "Issuer", "metadata": spec.metadata(ca),
         "spec": {"ca": {"secretName": ca}}},
    ]
    for role in roles(spec):
        objects.append(_certificate(spec, secret_name(spec, role), {
            "secretName": secret_name(spec, role), "commonName": role, "dnsNames": [DNS_NAME],
            "usages": ["digital signature", "server auth", "client auth"],
            "issuerRef": {"name": ca, "kind": "Issuer"}}))
    return objects
